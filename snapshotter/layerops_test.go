package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// fakeLayers records the layer calls, by path under snapshots/, and fails
// the ones told to; the rest do what the emulation does.
type fakeLayers struct {
	root  string
	mu    sync.Mutex
	calls []string
	// fail maps a call ("rename 3 rm-3", "deactivate 3", "destroy rm-3")
	// to the errors of its successive attempts, the last one repeating; nil
	// lets an attempt pass.
	fail map[string][]error
}

func (f *fakeLayers) call(c string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
	errs := f.fail[c]
	if len(errs) == 0 {
		return nil
	}
	err := errs[0]
	if len(errs) > 1 {
		f.fail[c] = errs[1:]
	}
	return err
}

func (f *fakeLayers) rel(p string) string {
	r, err := filepath.Rel(filepath.Join(f.root, "snapshots"), p)
	if err != nil {
		panic(err)
	}
	return r
}

func (f *fakeLayers) ops() layerOps {
	return layerOps{
		rename: func(oldpath, newpath string) error {
			if err := f.call("rename " + f.rel(oldpath) + " " + f.rel(newpath)); err != nil {
				return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
			}
			return os.Rename(oldpath, newpath)
		},
		deactivate: func(_ context.Context, dir string) error {
			return f.call("deactivate " + f.rel(dir))
		},
		destroy: func(_ context.Context, dir string) error {
			if err := f.call("destroy " + f.rel(dir)); err != nil {
				return err
			}
			return os.RemoveAll(dir)
		},
		scratch: func(ctx context.Context, dir string, parents []string, size uint64) error {
			if err := f.call("scratch " + f.rel(dir)); err != nil {
				return err
			}
			return createScratch(ctx, dir, parents, size)
		},
		commit: func(ctx context.Context, dir string, parents []string) error {
			if err := f.call("commit " + f.rel(dir)); err != nil {
				return err
			}
			return commitLayer(ctx, dir, parents)
		},
	}
}

// reset forgets the calls so far and fails the calls of fail from now on.
func (f *fakeLayers) reset(fail map[string][]error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls, f.fail = nil, fail
}

func (f *fakeLayers) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// openFake opens the snapshotter over the fake; its sweep waits an hour, so
// only the tests of the sweep see it run (openSweeping).
func openFake(t *testing.T, root string, f *fakeLayers) *Snapshotter {
	t.Helper()
	return openWith(t, root, f, sweepTimes{time.Hour, time.Hour})
}

func openWith(t *testing.T, root string, f *fakeLayers, every sweepTimes) *Snapshotter {
	t.Helper()
	s, err := open(context.Background(), root, f.ops(), every)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A leftover the layer driver cannot destroy (a layer a crash left in use)
// must not keep the snapshotter from serving: containerd's windows
// snapshotter does no cleanup at start at all, and every pull and pod on the
// node needs this one. Later cleanups retry it.
func TestNewSurvivesUndestroyableLeftover(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"rm-7", "42"} {
		if err := os.MkdirAll(filepath.Join(root, "snapshots", d, "Files"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeLayers{root: root, fail: map[string][]error{"destroy rm-7": {errors.New("the process cannot access the file because it is being used by another process"), nil}}}
	s := openFake(t, root, f)

	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"rm-7"}) {
		t.Errorf("after start snapshots/ holds %v, want only the undestroyable rm-7", got)
	}
	ctx := context.Background()
	unpackLayer(t, ctx, s, "base", "", "a")
	if err := s.Cleanup(ctx); err != nil {
		t.Fatalf("Cleanup once the leftover can go: %v", err)
	}
	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"1"}) {
		t.Errorf("after Cleanup snapshots/ holds %v, want only the new layer", got)
	}
}

// A leftover directory of a snapshot whose creation a crash cut short may
// still be activated, under its own path: deactivate it there before the
// rename (a rename of an activated layer is refused), then destroy it.
func TestCleanupDeactivatesLeftoverBeforeRename(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"rm-7", "42"} {
		if err := os.MkdirAll(filepath.Join(root, "snapshots", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f := &fakeLayers{root: root}
	openFake(t, root, f)
	want := []string{"deactivate 42", "rename 42 rm-42", "destroy rm-42", "destroy rm-7"}
	if got := f.callList(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// Errors Remove passes on keep their class (containerd's GC stops only on
// errors other than FailedPrecondition, and NotFound means nothing to do).
func TestRemoveErrorClasses(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	unpackLayer(t, ctx, s, "base", "", "a")
	must(s.Prepare(ctx, "child", "base"))
	for _, tc := range []struct {
		key  string
		want error
	}{
		{"no-such-key", errdefs.ErrNotFound},
		{"base", errdefs.ErrFailedPrecondition},
	} {
		if err := s.Remove(ctx, tc.key); !errors.Is(err, tc.want) {
			t.Errorf("Remove(%s) = %v, want %v", tc.key, err, fmt.Sprint(tc.want))
		}
	}
}
