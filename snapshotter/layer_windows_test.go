//go:build windows

package snapshotter

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/Microsoft/hcsshim"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
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

// The layer driver's refusals through hcsshim and the stand-in
// vmcompute.dll: an activated layer refused with ERROR_SHARING_VIOLATION
// (0x80070020) is in use, deactivated and destroyed; a layer refused with
// E_ACCESSDENIED (0x80070005) is left to the sweep, which destroys it once
// released; the leftover the runner made (activated, a link in it) is
// destroyed at start, the link and not what it points to.
func TestLayerDriverFaults(t *testing.T) {
	root := os.Getenv(layerRootEnv)
	if root == "" {
		t.Skipf("%s is unset: TestLayerDriverUnderWine runs this with the stand-in vmcompute.dll", layerRootEnv)
	}
	ctx := context.Background()
	s, err := New(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snapshots := filepath.Join(root, "snapshots")
	if got := entries(t, snapshots); len(got) != 0 {
		t.Fatalf("the leftover is not destroyed at start: snapshots holds %v", got)
	}

	tests := []struct {
		name   string
		refuse func(t *testing.T, dir string)
		code   windows.Errno
		class  error
		// deferred: Remove leaves the layer to the sweep.
		deferred bool
	}{
		{"activated", func(t *testing.T, dir string) {
			info, id := driverInfo(dir)
			if err := hcsshim.ActivateLayer(info, id); err != nil {
				t.Fatal(err)
			}
		}, windows.ERROR_SHARING_VIOLATION, errdefs.ErrFailedPrecondition, false},
		{"access denied", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "standin-denied"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, windows.ERROR_ACCESS_DENIED, errdefs.ErrPermissionDenied, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := decode(t, must(s.Prepare(ctx, tc.name, ""))).Path
			tc.refuse(t, dir)
			err := platformLayers.destroy(ctx, dir)
			if !errors.Is(err, tc.code) || !errors.Is(layerFault(err), tc.class) || !strings.Contains(err.Error(), "DestroyLayer") {
				t.Fatalf("destroy: %v, want %v from DestroyLayer, classed %v", err, tc.code, tc.class)
			}
			if err := s.Remove(ctx, tc.name); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			left := []string{}
			if tc.deferred {
				left = append(left, "rm-"+filepath.Base(dir))
			}
			if got := entries(t, snapshots); !reflect.DeepEqual(got, left) {
				t.Fatalf("snapshots holds %v after Remove, want %v", got, left)
			}
			if tc.deferred {
				if err := os.Remove(filepath.Join(snapshots, left[0], "standin-denied")); err != nil {
					t.Fatal(err)
				}
				waitEntries(t, root, []string{})
			}
		})
	}
}
