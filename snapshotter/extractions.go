package snapshotter

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/core/snapshots/storage"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// labelParentChainID is the label containerd's unpacker puts on the
// extraction snapshot of every layer but the first: the chain ID of the
// layer below (core/unpack/unpacker.go, labelSnapshotParent). A parentless
// unpack snapshot with it is a parallel unpack's, which gets its parent at
// commit (snapshots.RebaseCap).
const labelParentChainID = "containerd.io/snapshot/parent-chain-id"

// defaultIdleWait is how long a pull waits for another pull's extraction of
// the same layer while that extraction shows no sign of life (no layer
// being applied into it, no apply started or ended). A client that died
// between Prepare and Commit leaves its snapshot until containerd's garbage
// collection; waiting for it would stall every later pull of the layer.
const defaultIdleWait = time.Minute

// An extraction is an unpack snapshot a pull is filling with one layer.
// Pulls of the same layer onto the same parent wait for it instead of
// extracting the layer again.
type extraction struct {
	target target
	key    string        // the snapshot's key, once prepared
	dir    string        // the snapshot's directory, once prepared
	done   chan struct{} // closed when committed or removed
	// committed is set before done is closed.
	committed bool
	// applying counts the differ's Apply calls into the snapshot; last is
	// when one started or ended, or the snapshot was prepared.
	applying int
	last     time.Time
}

// target is what an extraction produces: the layer's chain ID (the
// snapshot.ref label) on a parent snapshot.
type target struct{ ref, parent string }

// extractions are the live extractions of this process, by target, key
// and directory.
type extractions struct {
	mu       sync.Mutex
	byTarget map[target]*extraction
	byKey    map[string]*extraction
	byDir    map[string]*extraction
}

func newExtractions() *extractions {
	return &extractions{byTarget: map[target]*extraction{}, byKey: map[string]*extraction{}, byDir: map[string]*extraction{}}
}

// claim returns the live extraction of t and false, or, when there is none
// (or take is set: the live one is given up on), a new one owned by the
// caller and true.
func (x *extractions) claim(t target, take bool) (*extraction, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if e := x.byTarget[t]; e != nil && !take {
		return e, false
	}
	e := &extraction{target: t, done: make(chan struct{}), last: time.Now()}
	x.byTarget[t] = e
	return e, true
}

// bind records the snapshot the claimed extraction e fills.
func (x *extractions) bind(e *extraction, key, dir string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e.key, e.dir, e.last = key, dir, time.Now()
	x.byKey[key] = e
	x.byDir[dir] = e
}

// end finishes e and wakes the pulls waiting for it.
func (x *extractions) end(e *extraction, committed bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.byTarget[e.target] == e {
		delete(x.byTarget, e.target)
	}
	delete(x.byKey, e.key)
	delete(x.byDir, e.dir)
	e.committed = committed
	close(e.done)
}

// endKey finishes the extraction of the snapshot key, if there is one.
func (x *extractions) endKey(key string, committed bool) {
	x.mu.Lock()
	e := x.byKey[key]
	x.mu.Unlock()
	if e != nil {
		x.end(e, committed)
	}
}

// applying marks a layer being applied into the snapshot directory dir;
// the returned function marks its end.
func (x *extractions) applying(dir string) func() {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.byDir[dir]
	if e == nil {
		return func() {}
	}
	e.applying++
	e.last = time.Now()
	return func() {
		x.mu.Lock()
		defer x.mu.Unlock()
		e.applying--
		e.last = time.Now()
	}
}

// wait waits until e ends (true) or has shown no sign of life for idle
// (false).
func (x *extractions) wait(ctx context.Context, e *extraction, idle time.Duration) (bool, error) {
	for {
		x.mu.Lock()
		left := idle - time.Since(e.last)
		if e.applying > 0 {
			left = idle
		}
		x.mu.Unlock()
		if left <= 0 {
			return false, nil
		}
		t := time.NewTimer(left)
		select {
		case <-e.done:
			t.Stop()
			return true, nil
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// Applying tells the snapshotter that a layer is being applied into the
// snapshot at path (a mount's source), until the returned function is
// called: pulls waiting for that extraction keep waiting while it lasts.
func (s *Snapshotter) Applying(path string) func() {
	return s.extracting.applying(filepath.Clean(path))
}

// prepareUnpack prepares the snapshot a pull extracts a layer into.
//
// A layer another pull is extracting onto the same parent is not extracted
// twice: the second Prepare waits for the first extraction and, once that
// is committed, answers AlreadyExists, as containerd's unpacker expects of
// a layer that exists (core/unpack/unpacker.go: it then finds the layer by
// its chain ID and skips it). containerd's metadata store, which receives
// the answer first, links the committed snapshot, found by its
// snapshot.ref label and parent, into the pull's namespace
// (core/metadata/snapshot.go, createSnapshot). A layer committed earlier,
// by a pull of any namespace, is answered the same way.
//
// A parallel unpack's snapshot (parentless, with a parent chain ID) gets its
// parent only at commit, so no snapshot of that target can exist, and none
// is waited for. Where the layer driver imports a layer only with its
// parents (Windows), it is refused.
func (s *Snapshotter) prepareUnpack(ctx context.Context, key, parent string, opts []snapshots.Opt) ([]mount.Mount, error) {
	var info snapshots.Info
	for _, o := range opts {
		if err := o(&info); err != nil {
			return nil, err
		}
	}
	rebased := parent == "" && info.Labels[labelParentChainID] != ""
	if rebased && s.layers.needParents {
		return nil, fmt.Errorf("prepare %s: %w", key, errParallelUnpack)
	}
	ref := info.Labels[snapshots.LabelSnapshotRef]
	if ref == "" || rebased {
		return s.create(ctx, snapshots.KindActive, key, parent, opts)
	}
	t := target{ref: ref, parent: parent}
	take := false
	for {
		e, mine := s.extracting.claim(t, take)
		if !mine {
			log.G(ctx).WithFields(log.Fields{"key": key, "layer": ref, "by": e.key}).Info("another pull is unpacking this layer; waiting for it")
			ended, err := s.extracting.wait(ctx, e, s.idleWait)
			if err != nil {
				return nil, fmt.Errorf("prepare %s: waiting for the unpack of layer %s in %s: %w", key, ref, e.key, err)
			}
			if !ended {
				log.G(ctx).WithFields(log.Fields{"key": key, "layer": ref, "by": e.key, "idle": s.idleWait}).Warn("the other unpack of this layer shows no progress; unpacking it again")
			}
			take = !ended
			continue
		}
		name, err := s.committedAs(ctx, t)
		if err != nil || name != "" {
			s.extracting.end(e, false)
			if err != nil {
				return nil, fmt.Errorf("prepare %s: %w", key, err)
			}
			return nil, fmt.Errorf("layer %s on %q is unpacked already, as %s: %w", ref, parent, name, errdefs.ErrAlreadyExists)
		}
		sn, err := s.createSnapshot(ctx, snapshots.KindActive, key, parent, opts)
		if err != nil {
			s.extracting.end(e, false)
			return nil, err
		}
		s.extracting.bind(e, key, s.dir(sn.ID))
		return s.mounts(sn), nil
	}
}

// committedAs returns the name of the committed snapshot of t, or "".
func (s *Snapshotter) committedAs(ctx context.Context, t target) (string, error) {
	var name string
	err := s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		return storage.WalkInfo(ctx, func(_ context.Context, info snapshots.Info) error {
			if name == "" && info.Kind == snapshots.KindCommitted && info.Parent == t.parent && info.Labels[snapshots.LabelSnapshotRef] == t.ref {
				name = info.Name
			}
			return nil
		})
	})
	// A new store has no buckets yet: no snapshots.
	if err != nil && !errdefs.IsNotFound(err) {
		return "", fmt.Errorf("look for layer %s: %w", t.ref, err)
	}
	return name, nil
}
