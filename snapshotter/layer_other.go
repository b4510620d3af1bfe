//go:build !windows

package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// Off Windows the snapshotter serves winproc's emulation backend, which
// builds a container's C: drive as an overlay mount: the parents' Files
// directories are the lower layers, the scratch's Files the upper one and its
// work directory overlayfs's workdir. Deletions in the scratch are overlayfs
// whiteouts, the same representation the layer importer writes, so a
// committed scratch is a layer as it stands.
//
// The emulation does not enforce the scratch size label: a directory has no
// size of its own.

// layersNeedParents: the emulation's importer writes a layer without reading
// its parents (whiteouts are overlayfs's, hard links stay inside the layer),
// so a layer unpacked without its parent can be given it at commit.
const layersNeedParents = false

func createScratch(ctx context.Context, dir string, parents []string, size uint64) error {
	for _, d := range []string{layermount.ScratchUpper, layermount.ScratchWork} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return fmt.Errorf("create scratch: %w", err)
		}
	}
	return nil
}

func commitLayer(ctx context.Context, dir string, parents []string) error {
	if err := os.RemoveAll(filepath.Join(dir, layermount.ScratchWork)); err != nil {
		return fmt.Errorf("drop overlay work directory of %s: %w", dir, err)
	}
	return nil
}

// destroyLayer removes dir unless something is mounted inside it: removing
// would delete what the mount shows (a host directory bound in), so the
// layer is in use until it is unmounted.
func destroyLayer(ctx context.Context, dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return fmt.Errorf("list mounts in %s: %w", dir, err)
	}
	if len(mounts) > 0 {
		return fmt.Errorf("destroy %s: %s is mounted on it: %w", dir, mounts[0].Mountpoint, unix.EBUSY)
	}
	return os.RemoveAll(dir)
}

// layerErr marks a busy layer (a mount in it) as in use; a refused access
// (EPERM, EACCES: an immutable file) is os.ErrPermission already.
func layerErr(err error) error {
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("%w: %w", errLayerInUse, err)
	}
	return err
}

// deactivateLayer has nothing to release: the emulation mounts a
// container's C: drive elsewhere, never over the snapshot directory.
func deactivateLayer(ctx context.Context, dir string) error { return nil }
