package snapshotter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
)

// refLabels are the labels containerd's unpacker gives an extraction
// snapshot: the layer's chain ID and, above the first layer, its parent's.
func refLabels(ref, parentChain string) snapshots.Opt {
	l := map[string]string{snapshots.LabelSnapshotRef: ref}
	if parentChain != "" {
		l[labelParentChainID] = parentChain
	}
	return snapshots.WithLabels(l)
}

type prepared struct {
	mounts []mount.Mount
	err    error
}

// prepareAsync prepares key in the background.
func prepareAsync(ctx context.Context, s *Snapshotter, key, parent string, opts ...snapshots.Opt) <-chan prepared {
	c := make(chan prepared, 1)
	go func() {
		m, err := s.Prepare(ctx, key, parent, opts...)
		c <- prepared{m, err}
	}()
	return c
}

// blocked fails the test if c delivers within d.
func blocked(t *testing.T, c <-chan prepared, d time.Duration) {
	t.Helper()
	select {
	case p := <-c:
		t.Fatalf("Prepare did not wait: %v, %v", p.mounts, p.err)
	case <-time.After(d):
	}
}

func receive(t *testing.T, c <-chan prepared) prepared {
	t.Helper()
	select {
	case p := <-c:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("Prepare still waits")
		return prepared{}
	}
}

// A layer unpacked without its parent (containerd's parallel unpack) is
// given it at commit and then stands in the chain like any other.
func TestRebaseAtCommit(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	base := unpackLayer(t, ctx, s, "L0", "", "a.txt")
	key := "extract-2 L1"
	l := decode(t, must(s.Prepare(ctx, key, "", refLabels("L1", "L0"))))
	if len(l.Parents) != 0 {
		t.Fatalf("parentless unpack snapshot has parents %v", l.Parents)
	}
	if err := os.MkdirAll(filepath.Join(l.Path, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "L1", key, snapshots.WithParent("L0")); err != nil {
		t.Fatal(err)
	}
	if info := must(s.Stat(ctx, "L1")); info.Parent != "L0" {
		t.Errorf("L1's parent is %q, want L0", info.Parent)
	}
	scratch := decode(t, must(s.Prepare(ctx, "c", "L1")))
	if want := []string{l.Path, base}; !equal(scratch.Parents, want) {
		t.Errorf("scratch over L1 has parents %v, want %v", scratch.Parents, want)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Where a layer is imported only with its parents (Windows), a parallel
// unpack's snapshot is refused at Prepare, and a parentless snapshot given
// a parent at commit is refused and stays as it was.
func TestRebaseRefusedWhereLayersNeedParents(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	s.layers.needParents = true
	unpackLayer(t, ctx, s, "L0", "", "a.txt")

	_, err := s.Prepare(ctx, "extract-2 L1", "", refLabels("L1", "L0"))
	if !errdefs.IsFailedPrecondition(err) || !errors.Is(err, errParallelUnpack) {
		t.Fatalf("parallel unpack Prepare: %v, want %v", err, errParallelUnpack)
	}
	// A first layer has no parent to be given: it is prepared as before.
	must(s.Prepare(ctx, "extract-3 L0b", "", refLabels("L0b", "")))

	must(s.Prepare(ctx, "extract-4 L1", ""))
	err = s.Commit(ctx, "L1", "extract-4 L1", snapshots.WithParent("L0"))
	if !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Commit with a new parent: %v, want FailedPrecondition", err)
	}
	if info := must(s.Stat(ctx, "extract-4 L1")); info.Kind != snapshots.KindActive {
		t.Errorf("the refused snapshot is %v, want still active", info.Kind)
	}
}

// A layer that is unpacked already, by any pull, is answered
// AlreadyExists, as containerd's unpacker and metadata store expect; the
// same layer on another parent is another layer.
func TestPrepareUnpackedLayerAlreadyExists(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	key := "extract-1 ns/1/L0"
	must(s.Prepare(ctx, key, "", refLabels("L0", "")))
	if err := s.Commit(ctx, "ns/2/L0", key, refLabels("L0", "")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, key, parent string
		opt               snapshots.Opt
		exists            bool
	}{
		{name: "same layer, same parent", key: "extract-2 ns2/3/L0", opt: refLabels("L0", ""), exists: true},
		{name: "same layer, other parent", key: "extract-3 ns2/4/L0", parent: "ns/2/L0", opt: refLabels("L0", "")},
		{name: "other layer", key: "extract-4 ns2/5/L9", opt: refLabels("L9", "")},
		{name: "no chain ID", key: "extract-5 x", opt: snapshots.WithLabels(nil)},
		{name: "parallel unpack", key: "extract-6 ns2/6/L0", opt: refLabels("L0", "P")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Prepare(ctx, tc.key, tc.parent, tc.opt)
			if tc.exists != errdefs.IsAlreadyExists(err) || (!tc.exists && err != nil) {
				t.Fatalf("Prepare: %v, want AlreadyExists %v", err, tc.exists)
			}
		})
	}
}

// A second pull of a layer another pull is extracting waits for it: for
// AlreadyExists when it is committed, for a snapshot of its own when it is
// removed or shows no sign of life, and not past its own context.
func TestPrepareWaitsForExtraction(t *testing.T) {
	for _, tc := range []struct {
		name string
		// first does what the first pull does once the second waits (in
		// a goroutine of its own).
		first  func(t *testing.T, s *Snapshotter, ctx context.Context, key, dir string)
		exists bool
	}{
		{name: "committed", exists: true, first: func(t *testing.T, s *Snapshotter, ctx context.Context, key, _ string) {
			if err := s.Commit(ctx, "L0", key, refLabels("L0", "")); err != nil {
				t.Error(err)
			}
		}},
		{name: "removed", first: func(t *testing.T, s *Snapshotter, ctx context.Context, key, _ string) {
			if err := s.Remove(ctx, key); err != nil {
				t.Error(err)
			}
		}},
		{name: "applying, then removed", first: func(t *testing.T, s *Snapshotter, ctx context.Context, key, dir string) {
			done := s.Applying(dir)
			time.Sleep(3 * s.idleWait)
			done()
			if err := s.Remove(ctx, key); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, ctx := newTestSnapshotter(t)
			s.idleWait = 300 * time.Millisecond
			first := decode(t, must(s.Prepare(ctx, "extract-1 L0", "", refLabels("L0", ""))))
			second := prepareAsync(ctx, s, "extract-2 L0", "", refLabels("L0", ""))
			blocked(t, second, 100*time.Millisecond)
			go tc.first(t, s, ctx, "extract-1 L0", first.Path)
			if tc.name == "applying, then removed" {
				blocked(t, second, 2*s.idleWait)
			}
			p := receive(t, second)
			if tc.exists {
				if !errdefs.IsAlreadyExists(p.err) {
					t.Fatalf("second Prepare: %v, want AlreadyExists", p.err)
				}
				return
			}
			if p.err != nil {
				t.Fatalf("second Prepare: %v", p.err)
			}
			if l := decode(t, p.mounts); l.Path == first.Path || len(entries(t, l.Path)) != 0 {
				t.Errorf("second Prepare got %s, want a new empty snapshot", l.Path)
			}
		})
	}
}

func TestPrepareStopsWaitingForIdleExtraction(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	s.idleWait = 200 * time.Millisecond
	must(s.Prepare(ctx, "extract-1 L0", "", refLabels("L0", "")))
	start := time.Now()
	second := decode(t, must(s.Prepare(ctx, "extract-2 L0", "", refLabels("L0", ""))))
	if d := time.Since(start); d < s.idleWait {
		t.Errorf("gave up after %v, before %v without progress", d, s.idleWait)
	}
	// The second extraction is the one a third pull now waits for.
	third := prepareAsync(ctx, s, "extract-3 L0", "", refLabels("L0", ""))
	blocked(t, third, 100*time.Millisecond)
	if err := s.Commit(ctx, "L0", "extract-2 L0", refLabels("L0", "")); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, third); !errdefs.IsAlreadyExists(p.err) {
		t.Fatalf("third Prepare: %v, want AlreadyExists", p.err)
	}
	if len(entries(t, second.Path)) != 0 {
		t.Errorf("the second pull's snapshot is not empty")
	}
	// The abandoned first extraction still goes away cleanly.
	if err := s.Remove(ctx, "extract-1 L0"); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareWaitEndsWithContext(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	must(s.Prepare(ctx, "extract-1 L0", "", refLabels("L0", "")))
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err := s.Prepare(wctx, "extract-2 L0", "", refLabels("L0", ""))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Prepare: %v, want the context's deadline", err)
	}
	if _, err := s.Stat(ctx, "extract-2 L0"); !errdefs.IsNotFound(err) {
		t.Errorf("the waiting Prepare left a snapshot: %v", err)
	}
}
