//go:build windows

package snapshotter

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containerd/errdefs"
)

// On Windows hcsshim imports a layer with its parents, so a parallel
// unpack's parentless snapshot is refused before anything is made, while a
// first layer is prepared as ever. Run under Wine by `make wine-test`.
func TestParallelUnpackRefusedOnWindows(t *testing.T) {
	root, err := os.MkdirTemp("", "snapshotter-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var paths []string
		filepath.WalkDir(root, func(p string, _ fs.DirEntry, _ error) error {
			paths = append(paths, p)
			return nil
		})
		for _, p := range slices.Backward(paths) {
			os.Remove(p)
		}
	})
	ctx := context.Background()
	s, err := New(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Prepare(ctx, "extract-1 L1", "", refLabels("L1", "L0"))
	if !errdefs.IsFailedPrecondition(err) || !errors.Is(err, errParallelUnpack) {
		t.Fatalf("parallel unpack Prepare: %v, want %v", err, errParallelUnpack)
	}
	if _, err := s.Stat(ctx, "extract-1 L1"); !errdefs.IsNotFound(err) {
		t.Errorf("the refused Prepare left a snapshot: %v", err)
	}
	if _, err := s.Prepare(ctx, "extract-2 L0", "", refLabels("L0", "")); err != nil {
		t.Errorf("first layer: %v", err)
	}
}
