package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// The layer driver refuses a layer the way Windows does (the failures
// behind snapshots and images that cannot be removed: containerd#5188,
// Windows-Containers#430): access denied on a rename or a destroy (a file
// of the layer held open, a read-only or immutable file), and a layer still
// activated or mounted. A removal never fails on them: the snapshot leaves
// the metadata at once and its directory is destroyed later by the sweep
// (sweep.go). Prepare and Commit, which cannot be deferred, fail with the
// class containerd acts on.

// errLayerInUse marks a layer driver error that means the layer is still
// activated, mounted or shared (layerErr in layer_*.go makes it).
var errLayerInUse = errors.New("layer in use")

// layerFault returns the errdefs class of a layer driver error, or nil for
// an error of no fault class: in use is FailedPrecondition (containerd's
// garbage collector skips such a snapshot and goes on), access denied
// PermissionDenied.
func layerFault(err error) error {
	switch {
	case errors.Is(err, errLayerInUse):
		return errdefs.ErrFailedPrecondition
	case errors.Is(err, os.ErrPermission):
		return errdefs.ErrPermissionDenied
	}
	return nil
}

// classed wraps the error of op on the layer dir with its class, naming the
// layer and what frees it.
func classed(op, dir string, err error) error {
	switch layerFault(err) {
	case errdefs.ErrFailedPrecondition:
		return fmt.Errorf("%s: layer %s is in use (activated for a container or mounted): stop the containers using it, then retry: %w: %w", op, dir, err, errdefs.ErrFailedPrecondition)
	case errdefs.ErrPermissionDenied:
		return fmt.Errorf("%s: access to layer %s is denied: run the snapshotter as SYSTEM or root and close what holds its files (a scanner, a backup, a shell in it; an immutable attribute), then retry: %w: %w", op, dir, err, errdefs.ErrPermissionDenied)
	}
	return fmt.Errorf("%s: layer %s: %w", op, dir, err)
}

// markRemoved renames dir to removed. A rename refused for a fault class
// deactivates the layer under dir (a scratch a crash or a container left
// activated; on Windows a layer is activated under its own path) and tries
// once more. It returns the directory left to destroy: removed, or dir
// when the rename is still refused, so the sweep destroys it under its
// old name (a snapshot id is never given again). Other errors are returned.
func (s *Snapshotter) markRemoved(ctx context.Context, dir, removed string) (string, error) {
	err := s.layers.rename(dir, removed)
	if err == nil || layerFault(err) == nil {
		return removed, err
	}
	if derr := s.layers.deactivate(ctx, dir); derr != nil && !errors.Is(derr, os.ErrNotExist) {
		log.G(ctx).WithError(derr).WithField("dir", dir).Debug("deactivate layer after a refused rename")
	}
	if rerr := s.layers.rename(dir, removed); rerr != nil {
		if layerFault(rerr) == nil {
			return removed, fmt.Errorf("rename after deactivating the layer: %w (first rename: %v)", rerr, err)
		}
		log.G(ctx).WithError(rerr).WithField("dir", dir).Warn("layer cannot be renamed for removal; it is destroyed under its own name once released")
		return dir, nil
	}
	return removed, nil
}

// destroy destroys the layer dir. A destroy refused for a fault class
// deactivates the layer and tries once more; a layer already gone is
// destroyed.
func (s *Snapshotter) destroy(ctx context.Context, dir string) error {
	err := s.layers.destroy(ctx, dir)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if layerFault(err) == nil {
		return classed("destroy", dir, err)
	}
	if derr := s.layers.deactivate(ctx, dir); derr != nil && !errors.Is(derr, os.ErrNotExist) {
		log.G(ctx).WithError(derr).WithField("dir", dir).Debug("deactivate layer after a refused destroy")
	}
	if err := s.layers.destroy(ctx, dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return classed("destroy", dir, err)
	}
	return nil
}

// destroyOrDefer destroys a removed snapshot's directory now, or leaves it
// to the sweep.
func (s *Snapshotter) destroyOrDefer(ctx context.Context, dir string) {
	if err := s.destroy(ctx, dir); err != nil {
		log.G(ctx).WithError(err).WithField("dir", dir).Warn("removed snapshot's directory is destroyed by the sweep once released")
		s.sweep.wake()
	}
}
