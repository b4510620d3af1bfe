//go:build linux

package snapshotter

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// chattr sets or clears ("+i", "-i") the immutable attribute of path.
func chattr(flag, path string) error {
	out, err := exec.Command("chattr", flag, path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr %s %s: %w: %s", flag, path, err, out)
	}
	return nil
}

// canChattr skips the test unless root can make a file in dir immutable.
func canChattr(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a file immutable (chattr +i) needs root")
	}
	if _, err := exec.LookPath("chattr"); err != nil {
		t.Skip("chattr is not installed (e2fsprogs)")
	}
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := chattr("+i", probe); err != nil {
		t.Skipf("the file system of %s does not take the immutable attribute: %v", dir, err)
	}
	if err := chattr("-i", probe); err != nil {
		t.Fatal(err)
	}
	os.Remove(probe)
}

// mountInLayer mounts a tmpfs holding a file inside the layer dir; its
// undoing checks the file is still there and unmounts it.
func mountInLayer(t *testing.T, dir string) (undo func(dir string) error) {
	rel := filepath.Join(layermount.ScratchUpper, "mnt")
	if err := os.Mkdir(filepath.Join(dir, rel), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", filepath.Join(dir, rel), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rel, "kept"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(dir string) error {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(filepath.Join(p, "kept")); err != nil {
			t.Errorf("the destroy deleted what the mount in the layer shows: %v", err)
		}
		return unix.Unmount(p, unix.MNT_DETACH)
	}
}

// The emulation's layer driver under real faults: a layer directory or a
// file in one made immutable (EPERM: access denied), and a file system
// mounted inside a layer (in use). Remove succeeds at once, nothing the
// mount shows is deleted, and the sweep (at its real intervals) destroys
// the directory once the fault clears.
func TestRemoveUnderLinuxLayerFaults(t *testing.T) {
	tests := []struct {
		name string
		// fault makes the fault in the scratch dir and returns its undoing
		// for the directory as it is named then.
		fault func(t *testing.T, dir string) (undo func(dir string) error)
		// left is the directory Remove leaves: "2" when even the rename
		// was refused.
		left string
	}{
		{
			name: "immutable layer directory",
			fault: func(t *testing.T, dir string) func(string) error {
				if err := chattr("+i", dir); err != nil {
					t.Fatal(err)
				}
				return func(dir string) error { return chattr("-i", dir) }
			},
			left: "2",
		},
		{
			name: "immutable file in a layer",
			fault: func(t *testing.T, dir string) func(string) error {
				rel := filepath.Join(layermount.ScratchUpper, "held")
				if err := os.WriteFile(filepath.Join(dir, rel), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := chattr("+i", filepath.Join(dir, rel)); err != nil {
					t.Fatal(err)
				}
				return func(dir string) error { return chattr("-i", filepath.Join(dir, rel)) }
			},
			left: "rm-2",
		},
		{name: "mount in a layer", fault: mountInLayer, left: "rm-2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			canChattr(t, root)
			ctx := context.Background()
			s, err := New(ctx, root)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			unpackLayer(t, ctx, s, "base", "", "a")
			dir := decode(t, must(s.Prepare(ctx, "scratch", "base"))).Path
			undo := tc.fault(t, dir)
			left := filepath.Join(root, "snapshots", tc.left)
			undone := false
			// Undone even when the test fails, or t.TempDir cannot go:
			// under the name the layer has then.
			t.Cleanup(func() {
				if !undone && undo(left) != nil {
					undo(dir)
				}
			})

			start := time.Now()
			if err := s.Remove(ctx, "scratch"); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			t.Logf("Remove returned in %v", time.Since(start))
			if _, err := s.Stat(ctx, "scratch"); !errdefs.IsNotFound(err) {
				t.Errorf("Stat after Remove: %v, want NotFound", err)
			}
			// The first sweep, after 1 s, finds the fault still there.
			time.Sleep(1500 * time.Millisecond)
			if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"1", tc.left}) {
				t.Fatalf("snapshots/ holds %v while the fault holds, want [1 %s]", got, tc.left)
			}
			if err := undo(left); err != nil {
				t.Fatalf("clear the fault: %v", err)
			}
			undone = true
			cleared := time.Now()
			waitEntries(t, root, []string{"1"})
			t.Logf("swept %v after the fault cleared", time.Since(cleared))
		})
	}
}
