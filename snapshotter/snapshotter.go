// Package snapshotter is a windowsfilter snapshotter: the on-disk layout and
// mount format of containerd's built-in "windows" snapshotter, so runhcs and
// winproc's shim can both consume its snapshots.
//
// Layout under the root directory:
//
//	metadata.db          bolt metadata (containerd's core/snapshots/storage)
//	snapshots/<id>/      one directory per snapshot, named by its numeric id
//	snapshots/rm-<id>/   a removed snapshot not yet destroyed (or, when the
//	                     rename was refused, snapshots/<id>/ with no
//	                     metadata)
//
// An unpack snapshot (key with "extract-") is an empty directory the differ
// fills. A parentless active or view snapshot gets Files\ (a new base layer).
// An active or view snapshot with parents gets a scratch: on Windows
// sandbox.vhdx copied from the base layer's blank.vhdx, in the Linux
// emulation a writable upper directory. Every snapshot is handed out as one
// windows-layer mount; package layermount owns that mount and the names
// above.
//
// Pulls of one layer do not extract it twice: an unpack Prepare for a
// layer another pull is extracting waits for it and is answered
// AlreadyExists (extractions.go). Off Windows an unpack snapshot may be
// prepared without its parent and given it at commit, so containerd can
// extract a pull's layers in parallel.
//
// The platform-specific work (HCS layer calls on Windows, plain directories
// in the emulation) lives behind four functions in layer_*.go (createScratch,
// commitLayer, destroyLayer, deactivateLayer), the classing of their errors
// (layerErr) and one constant (layersNeedParents); everything else here is
// shared and tested on Linux. A layer the driver refuses is removed later
// (removal.go, sweep.go).
package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/core/snapshots/storage"
	"github.com/containerd/containerd/v2/pkg/sys"
	"github.com/containerd/continuity/fs"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// Scratch size labels, as containerd's windows snapshotter reads them.
const (
	rootfsSizeBytesLabel = "containerd.io/snapshot/windows/rootfs.sizebytes"
	// Deprecated by containerd in favour of rootfsSizeBytesLabel; still honoured.
	rootfsSizeGBLabel = "containerd.io/snapshot/io.microsoft.container.storage.rootfs.size-gb"
)

const removedPrefix = "rm-"

// Snapshotter implements containerd's snapshots.Snapshotter and
// snapshots.Cleaner for windowsfilter layers.
type Snapshotter struct {
	root       string
	ms         *storage.MetaStore
	layers     layerOps
	extracting *extractions
	// idleWait bounds the wait for another pull's extraction that shows no
	// sign of life (defaultIdleWait).
	idleWait time.Duration
	sweep    *sweeper
	// cleaning is held by the Cleanup under way: the sweep's or
	// containerd's, never both.
	cleaning sync.Mutex
}

// layerOps are the file-system and layer-driver calls whose failures decide
// how Prepare, Commit, Remove and Cleanup proceed (their errors classed by
// layerErr, layer_*.go), and whether the layer driver imports a layer only
// with its parents; tests replace them.
type layerOps struct {
	rename     func(oldpath, newpath string) error
	deactivate func(ctx context.Context, dir string) error
	destroy    func(ctx context.Context, dir string) error
	scratch    func(ctx context.Context, dir string, parents []string, size uint64) error
	commit     func(ctx context.Context, dir string, parents []string) error
	// needParents: a layer cannot be imported without its parents, so an
	// unpack snapshot cannot be given its parent at commit (see
	// errParallelUnpack).
	needParents bool
}

var platformLayers = layerOps{
	rename: func(oldpath, newpath string) error { return layerErr(os.Rename(oldpath, newpath)) },
	deactivate: func(ctx context.Context, dir string) error {
		return layerErr(deactivateLayer(ctx, dir))
	},
	destroy: func(ctx context.Context, dir string) error { return layerErr(destroyLayer(ctx, dir)) },
	scratch: func(ctx context.Context, dir string, parents []string, size uint64) error {
		return layerErr(createScratch(ctx, dir, parents, size))
	},
	commit: func(ctx context.Context, dir string, parents []string) error {
		return layerErr(commitLayer(ctx, dir, parents))
	},
	needParents: layersNeedParents,
}

// errParallelUnpack refuses a layer prepared without its parent, to be
// given it at commit (containerd's parallel unpack), where the layer driver
// imports a layer only with its parents.
var errParallelUnpack = fmt.Errorf(`on Windows a layer is imported with its parent layers, so containerd cannot unpack layers in parallel: remove "rebase" from the capabilities of [proxy_plugins.%s] in containerd's config: %w`, containerdnames.Snapshotter, errdefs.ErrFailedPrecondition)

var (
	_ snapshots.Snapshotter = (*Snapshotter)(nil)
	_ snapshots.Cleaner     = (*Snapshotter)(nil)
)

// New opens (or creates) the snapshotter at root, destroys what an earlier
// run left half removed and starts the sweep (sweep.go). A leftover that
// cannot be destroyed is logged and left to the sweep: containerd's windows
// snapshotter does no cleanup at start at all, and every pull and pod on the
// node needs this service. Close stops the sweep.
func New(ctx context.Context, root string) (*Snapshotter, error) {
	return open(ctx, root, platformLayers, sweepTimes{sweepFirst, sweepMax})
}

func open(ctx context.Context, root string, layers layerOps, every sweepTimes) (*Snapshotter, error) {
	// For Administrators and SYSTEM only, as containerd's windows
	// snapshotter makes its root: the layers of every image on the node.
	if err := sys.MkdirAllWithACL(layermount.SnapshotsDir(root), 0o700); err != nil {
		return nil, fmt.Errorf("create snapshotter root %s: %w", root, err)
	}
	ms, err := storage.NewMetaStore(filepath.Join(root, "metadata.db"))
	if err != nil {
		return nil, fmt.Errorf("open snapshot metadata in %s: %w", root, err)
	}
	s := &Snapshotter{root: root, ms: ms, layers: layers, extracting: newExtractions(), idleWait: defaultIdleWait}
	err = s.Cleanup(ctx)
	if err != nil {
		log.G(ctx).WithError(err).WithField("root", root).Warn("leftover snapshot directories stay until the sweep can destroy them")
	}
	s.sweep = startSweep(ctx, s.Cleanup, every, err != nil)
	return s, nil
}

// Root returns the directory the snapshotter keeps its state in.
func (s *Snapshotter) Root() string { return s.root }

func (s *Snapshotter) dir(id string) string {
	return filepath.Join(layermount.SnapshotsDir(s.root), id)
}

func (s *Snapshotter) dirs(ids []string) []string {
	paths := make([]string, len(ids))
	for i, id := range ids {
		paths[i] = s.dir(id)
	}
	return paths
}

// Stat returns the info of the snapshot key.
func (s *Snapshotter) Stat(ctx context.Context, key string) (info snapshots.Info, err error) {
	err = s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		_, info, _, err = storage.GetInfo(ctx, key)
		return err
	})
	return info, err
}

// Update changes the mutable fields (labels) of a snapshot.
func (s *Snapshotter) Update(ctx context.Context, info snapshots.Info, fieldpaths ...string) (_ snapshots.Info, err error) {
	err = s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		info, err = storage.UpdateInfo(ctx, info, fieldpaths...)
		return err
	})
	return info, err
}

// Usage returns the disk usage of a snapshot: recorded at commit for
// committed snapshots, measured now for active ones.
func (s *Snapshotter) Usage(ctx context.Context, key string) (usage snapshots.Usage, err error) {
	var (
		id   string
		info snapshots.Info
	)
	err = s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		id, info, usage, err = storage.GetInfo(ctx, key)
		return err
	})
	if err != nil {
		return snapshots.Usage{}, err
	}
	if info.Kind == snapshots.KindActive {
		du, err := fs.DiskUsage(ctx, s.dir(id))
		if err != nil {
			return snapshots.Usage{}, fmt.Errorf("measure usage of snapshot %s: %w", key, err)
		}
		usage = snapshots.Usage(du)
	}
	return usage, nil
}

// Walk calls fn for every snapshot matching the filters.
func (s *Snapshotter) Walk(ctx context.Context, fn snapshots.WalkFunc, filters ...string) error {
	return s.ms.WithTransaction(ctx, false, func(ctx context.Context) error {
		return storage.WalkInfo(ctx, fn, filters...)
	})
}

// Prepare creates an active snapshot: a layer to unpack into (see
// prepareUnpack), a new base layer, or a container's scratch over parent.
func (s *Snapshotter) Prepare(ctx context.Context, key, parent string, opts ...snapshots.Opt) ([]mount.Mount, error) {
	if isUnpack(key) {
		return s.prepareUnpack(ctx, key, parent, opts)
	}
	return s.create(ctx, snapshots.KindActive, key, parent, opts)
}

// View creates a read-only snapshot of parent.
func (s *Snapshotter) View(ctx context.Context, key, parent string, opts ...snapshots.Opt) ([]mount.Mount, error) {
	return s.create(ctx, snapshots.KindView, key, parent, opts)
}

// Mounts returns the mount of an active or view snapshot again.
func (s *Snapshotter) Mounts(ctx context.Context, key string) ([]mount.Mount, error) {
	var sn storage.Snapshot
	err := s.ms.WithTransaction(ctx, false, func(ctx context.Context) (err error) {
		sn, err = storage.GetSnapshot(ctx, key)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mounts of snapshot %s: %w", key, err)
	}
	return s.mounts(sn), nil
}

func (s *Snapshotter) mounts(sn storage.Snapshot) []mount.Mount {
	return []mount.Mount{layermount.Layer{
		Path:     s.dir(sn.ID),
		ReadOnly: sn.Kind == snapshots.KindView,
		Parents:  s.dirs(sn.ParentIDs),
	}.Mount()}
}

func isUnpack(key string) bool { return strings.Contains(key, snapshots.UnpackKeyPrefix) }

func (s *Snapshotter) create(ctx context.Context, kind snapshots.Kind, key, parent string, opts []snapshots.Opt) ([]mount.Mount, error) {
	sn, err := s.createSnapshot(ctx, kind, key, parent, opts)
	if err != nil {
		return nil, err
	}
	return s.mounts(sn), nil
}

func (s *Snapshotter) createSnapshot(ctx context.Context, kind snapshots.Kind, key, parent string, opts []snapshots.Opt) (storage.Snapshot, error) {
	var sn storage.Snapshot
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) (err error) {
		sn, err = storage.CreateSnapshot(ctx, kind, key, parent, opts...)
		if err != nil {
			return fmt.Errorf("create snapshot %s: %w", key, err)
		}
		dir := s.dir(sn.ID)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("create snapshot directory %s: %w", dir, err)
		}
		defer func() {
			// The transaction is rolled back on error, so the directory
			// must go with it.
			if err != nil {
				if rmErr := os.RemoveAll(dir); rmErr != nil {
					log.G(ctx).WithError(rmErr).WithField("dir", dir).Warn("remove directory of failed snapshot")
				}
			}
		}()

		switch {
		case isUnpack(key):
			// An unpack snapshot stays empty until the differ imports a
			// layer into it; making a scratch for it would only be thrown
			// away.
			return nil
		case len(sn.ParentIDs) == 0:
			// A new base layer: valid base layers have Files\.
			if err := os.Mkdir(filepath.Join(dir, layermount.FilesDir), 0o700); err != nil {
				return fmt.Errorf("create %s in snapshot %s: %w", layermount.FilesDir, key, err)
			}
			return nil
		}

		// A view gets a scratch too, as in containerd's windows snapshotter
		// (createSnapshot): the layer driver mounts a layer stack only
		// through a scratch, read-only or not.
		var info snapshots.Info
		for _, o := range opts {
			if err := o(&info); err != nil {
				return err
			}
		}
		size, err := scratchSize(info.Labels)
		if err != nil {
			return err
		}
		if err := s.layers.scratch(ctx, dir, s.dirs(sn.ParentIDs), size); err != nil {
			return classed("create scratch for snapshot "+key, dir, err)
		}
		return nil
	})
	return sn, err
}

// scratchSize reads the requested scratch size from the labels; 0 means the
// base layer's default.
func scratchSize(labels map[string]string) (uint64, error) {
	if v, ok := labels[rootfsSizeBytesLabel]; ok {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("label %s=%q is not a size in bytes: %w", rootfsSizeBytesLabel, v, errdefs.ErrInvalidArgument)
		}
		return n, nil
	}
	if v, ok := labels[rootfsSizeGBLabel]; ok {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("label %s=%q is not a size in GB: %w", rootfsSizeGBLabel, v, errdefs.ErrInvalidArgument)
		}
		return n << 30, nil
	}
	return 0, nil
}

// Commit turns the active snapshot key into the committed snapshot name.
// A snapshot prepared without a parent may be given one here
// (snapshots.WithParent, containerd's rebase) where a layer does not depend
// on its parents: off Windows, where the importer writes a layer without
// reading them (snapshotter/layertar). The pulls waiting for an extraction
// into key learn that it is done.
func (s *Snapshotter) Commit(ctx context.Context, name, key string, opts ...snapshots.Opt) error {
	var base snapshots.Info
	for _, o := range opts {
		if err := o(&base); err != nil {
			return err
		}
	}
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		sn, err := storage.GetSnapshot(ctx, key)
		if err != nil {
			return fmt.Errorf("commit snapshot %s: %w", key, err)
		}
		if sn.Kind != snapshots.KindActive {
			return fmt.Errorf("commit snapshot %s: only active snapshots can be committed: %w", key, errdefs.ErrFailedPrecondition)
		}
		if base.Parent != "" && len(sn.ParentIDs) == 0 && s.layers.needParents {
			// HCS wrote its layer as a base layer.
			return fmt.Errorf("commit snapshot %s onto %s: it was prepared without a parent: %w", key, base.Parent, errParallelUnpack)
		}
		dir := s.dir(sn.ID)
		// A layer the differ imported is final already; a base layer or a
		// scratch written in place must be turned into a read-only layer.
		if !isUnpack(key) {
			if err := s.layers.commit(ctx, dir, s.dirs(sn.ParentIDs)); err != nil {
				return classed("commit snapshot "+key, dir, err)
			}
		}
		usage, err := fs.DiskUsage(ctx, dir)
		if err != nil {
			return fmt.Errorf("measure usage of snapshot %s: %w", key, err)
		}
		if _, err := storage.CommitActive(ctx, key, name, snapshots.Usage(usage), opts...); err != nil {
			return fmt.Errorf("commit snapshot %s as %s: %w", key, name, err)
		}
		return nil
	})
	if err == nil {
		s.extracting.endKey(key, true)
	}
	return err
}

// Remove deletes the snapshot key. The directory is renamed to rm-<id>
// inside the metadata transaction, so no half-deleted snapshot is ever
// visible, and destroyed after it.
//
// A layer the driver refuses (access denied, still activated or mounted:
// removal.go) does not fail the removal: after a deactivation and a retry,
// as containerd's windows snapshotter does (plugins/snapshots/windows
// common.go, preRemove), the snapshot leaves the metadata and the sweep
// destroys its directory, renamed or not, once released. A rename failing
// otherwise is FailedPrecondition, on which containerd's garbage collector
// logs and goes on with the other snapshots.
func (s *Snapshotter) Remove(ctx context.Context, key string) error {
	var dir, doomed string
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		id, _, err := storage.Remove(ctx, key)
		if err != nil {
			return fmt.Errorf("remove snapshot %s: %w", key, err)
		}
		dir = s.dir(id)
		doomed, err = s.markRemoved(ctx, dir, s.dir(removedPrefix+id))
		if errors.Is(err, os.ErrNotExist) {
			doomed = ""
			return nil
		}
		if err != nil {
			doomed = ""
			return fmt.Errorf("remove snapshot %s: %w (containerd retries at its next garbage collection): %w", key, err, errdefs.ErrFailedPrecondition)
		}
		return nil
	})
	if err != nil {
		if doomed != "" && doomed != dir {
			// The rename happened but the transaction did not commit: put
			// the directory back so metadata and disk agree.
			if _, statErr := os.Stat(doomed); statErr == nil {
				if rbErr := s.layers.rename(doomed, dir); rbErr != nil {
					log.G(ctx).WithError(rbErr).WithField("dir", doomed).Error("restore directory after failed remove")
				}
			}
		}
		return err
	}
	// Pulls waiting for an extraction into key unpack the layer themselves.
	s.extracting.endKey(key, false)
	if doomed != "" {
		s.destroyOrDefer(ctx, doomed)
	}
	return nil
}

// Cleanup destroys every snapshot directory the metadata does not know: rm-
// directories whose destruction failed, and directories of snapshots whose
// creation was cut short by a crash.
//
// The listing runs in a write transaction: snapshots are created inside write
// transactions too, so none can be half made while Cleanup looks. A Cleanup
// called while another runs (the sweep's, containerd's) leaves the work to
// that one.
func (s *Snapshotter) Cleanup(ctx context.Context) error {
	if !s.cleaning.TryLock() {
		return nil
	}
	defer s.cleaning.Unlock()
	var doomed []string
	err := s.ms.WithTransaction(ctx, true, func(ctx context.Context) error {
		known, err := storage.IDMap(ctx)
		if errdefs.IsNotFound(err) {
			// A new store has no buckets yet: no snapshots.
			err = nil
		}
		if err != nil {
			return fmt.Errorf("list snapshots: %w", err)
		}
		entries, err := os.ReadDir(layermount.SnapshotsDir(s.root))
		if err != nil {
			return fmt.Errorf("list snapshot directories: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if _, ok := known[name]; ok {
				continue
			}
			if !strings.HasPrefix(name, removedPrefix) {
				// A crash may have left it activated, under this name:
				// release it here, where a rename (and the destroy) of an
				// activated layer would be refused.
				if err := s.layers.deactivate(ctx, s.dir(name)); err != nil && !errors.Is(err, os.ErrNotExist) {
					log.G(ctx).WithError(err).WithField("dir", s.dir(name)).Debug("deactivate leftover layer")
				}
				// Mark it removed first, so a crash during the destroy
				// below leaves a name that says what it is.
				if err := s.layers.rename(s.dir(name), s.dir(removedPrefix+name)); err == nil {
					name = removedPrefix + name
				}
			}
			doomed = append(doomed, s.dir(name))
		}
		return nil
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range doomed {
		log.G(ctx).WithField("dir", dir).Info("destroying leftover snapshot directory")
		if err := s.destroy(ctx, dir); err != nil {
			errs = append(errs, fmt.Errorf("destroy leftover: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Close stops the sweep and closes the metadata store. What the sweep had
// not destroyed yet is destroyed at the next start.
func (s *Snapshotter) Close() error {
	return errors.Join(s.sweep.stop(), s.ms.Close())
}
