package jobcontainer

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/scratch"
)

// bindRootfs is the rootfs where the host has the bind filter (Windows
// Server 2022 and later): the scratch's volume (shim/scratch) bound at the
// mount point, as runhcs binds it (hcsshim internal/jobcontainers
// setupRootfsBinding). Nothing is left on the disk at the mount point
// once the binding is removed.
type bindRootfs struct{ b *Backend }

func (r bindRootfs) mount(ctx context.Context, l compute.Layers, size uint64, dir string) error {
	h := r.b.host
	return r.b.mountScratch(ctx, l, size, func(volume string) error {
		if err := h.mkdirAll(parentDir(dir)); err != nil {
			return classify(fmt.Sprintf("make the directory of the mount point %s", dir), err, h.facts(err))
		}
		if err := h.bind(dir, volume, false); err != nil {
			return classify(fmt.Sprintf("bind the scratch's volume %s at %s", volume, dir), err, h.facts(err))
		}
		return nil
	})
}

// unmount removes the binding (one already gone is no error), then
// releases the scratch. While the binding stays, the scratch does too.
func (r bindRootfs) unmount(ctx context.Context, scratchDir, dir string) (bool, error) {
	if err := r.b.unbind(dir); err != nil {
		return false, err
	}
	err := r.b.scratch.Release(scratchDir)
	return !scratch.StillActive(err), err
}

// bindDirectories binds each mapped directory at its place under the
// mount point, read-only where the mount is: unlike a link, the bind
// filter enforces it.
func (b *Backend) bindDirectories(dirs []compute.MappedDirectory, places []string) error {
	for i, d := range dirs {
		if err := b.host.mkdirAll(parentDir(places[i])); err != nil {
			return classify(fmt.Sprintf("mount %s → %s: make the directory of %s", d.HostPath, d.ContainerPath, places[i]), err, b.host.facts(err))
		}
		if err := b.host.bind(places[i], d.HostPath, d.ReadOnly); err != nil {
			return classify(fmt.Sprintf("mount %s → %s: bind it at %s", d.HostPath, d.ContainerPath, places[i]), err, b.host.facts(err))
		}
	}
	return nil
}

// unbindAll removes the bindings at places, the last first, and returns
// those it could not remove with the errors.
func (b *Backend) unbindAll(places []string) (left []string, err error) {
	var errs []error
	for i := len(places) - 1; i >= 0; i-- {
		if uerr := b.unbind(places[i]); uerr != nil {
			errs = append(errs, uerr)
			left = append([]string{places[i]}, left...)
		}
	}
	return left, errors.Join(errs...)
}

// unbind removes the binding at root; none there is no error. The bind
// filter answers ERROR_INVALID_PARAMETER for a root without a binding
// (microsoft/go-winio#274): one never made (a Create that failed before
// it) or gone with a reboot, as bindings do not survive one. containerd's
// Unmount (core/mount/mount_windows.go) tolerates it and ERROR_NOT_FOUND
// alike.
func (b *Backend) unbind(root string) error {
	err := b.host.unbind(root)
	if f := b.host.facts(err); err != nil && !f.NotExist && !f.InvalidParameter {
		return classify(fmt.Sprintf("remove the binding at %s", root), err, f)
	}
	return nil
}

// filterSource is a binding's source as BfSetupFilter takes it: a volume
// named by its GUID alone gets its root's separator (a volume is bound by
// its root, as go-winio's ApplyFileBinding binds it); anything else, a
// file or directory on such a volume included, is passed unchanged, as
// hcsshim's job containers pass it.
func filterSource(source string) string {
	if volumeGUIDPath.MatchString(source) {
		return source + `\`
	}
	return source
}

// volumeGUIDPath is a volume's GUID name without its root's separator.
var volumeGUIDPath = regexp.MustCompile(`(?i)^\\\\[?.]\\Volume\{[0-9a-f-]{36}\}$`)

// parentDir is the directory of a Windows path.
func parentDir(p string) string { return p[:strings.LastIndex(p, `\`)] }
