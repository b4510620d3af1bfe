//go:build windows

package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/pkg/ociwclayer"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/dllguard"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// On Windows the layer operations are HCS's, as in containerd's windows
// snapshotter: a scratch is a copy of the base layer's blank.vhdx, grown on
// request; committing a scratch exports it and imports it back as a
// read-only layer; deactivating and destroying go through the layer driver.

// layersNeedParents: hcsshim imports a layer with its parents
// (ociwclayer.ImportLayerFromTar → wclayer.NewLayerWriter): without them it
// writes a base layer, and a layer with parents reads them for hard links
// into them, a cloned UtilityVM and HCS's ImportLayer. docs/architecture.md,
// "Pull or import", cites the functions.
const layersNeedParents = true

func driverInfo(dir string) (hcsshim.DriverInfo, string) {
	return hcsshim.DriverInfo{HomeDir: filepath.Dir(dir)}, filepath.Base(dir)
}

func createScratch(ctx context.Context, dir string, parents []string, size uint64) error {
	base := parents[len(parents)-1]
	if err := copyFile(filepath.Join(base, layermount.BlankVHDX), filepath.Join(dir, layermount.SandboxVHDX)); err != nil {
		return err
	}
	if size > 0 {
		info, id := driverInfo(dir)
		if err := dllguard.Call("expand scratch", func() error { return hcsshim.ExpandSandboxSize(info, id, size) }); err != nil {
			return fmt.Errorf("grow %s to %d bytes: %w", layermount.SandboxVHDX, size, err)
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open scratch template: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

func commitLayer(ctx context.Context, dir string, parents []string) error {
	if len(parents) == 0 {
		return dllguard.Call("convert to a base layer (offreg.dll writes its registry hives)", func() error { return hcsshim.ConvertToBaseLayer(dir) })
	}
	if err := winio.EnableProcessPrivileges([]string{winio.SeBackupPrivilege, winio.SeRestorePrivilege}); err != nil {
		return fmt.Errorf("enable backup and restore privileges: %w", err)
	}
	r, w := io.Pipe()
	go func() {
		w.CloseWithError(dllguard.Call("export scratch", func() error { return ociwclayer.ExportLayerToTar(ctx, w, dir, parents) }))
	}()
	// Importing needs SeSecurityPrivilege when the root sits on a mounted
	// VHDX (containerd found this); harmless elsewhere.
	err := winio.RunWithPrivileges([]string{winio.SeSecurityPrivilege}, func() error {
		return dllguard.Call("import scratch", func() error {
			_, err := ociwclayer.ImportLayerFromTar(ctx, r, dir, parents)
			return err
		})
	})
	if err != nil {
		r.CloseWithError(err)
		return fmt.Errorf("import scratch %s as a read-only layer: %w", dir, err)
	}
	_, err = io.Copy(io.Discard, r)
	return err
}

// destroyLayer destroys a layer, renamed to rm-<id> or, when the rename was
// refused, under its own name. A layer is activated under its original
// path, so the caller deactivates it there before the rename; a destroy
// refused as in use deactivates it under the path it has.
func destroyLayer(ctx context.Context, dir string) error {
	info, id := driverInfo(dir)
	return dllguard.Call("destroy layer", func() error { return hcsshim.DestroyLayer(info, id) })
}

func deactivateLayer(ctx context.Context, dir string) error {
	info, id := driverInfo(dir)
	return dllguard.Call("deactivate layer", func() error { return hcsshim.DeactivateLayer(info, id) })
}

// layerErr classes the layer driver's errors: a layer activated, or a file
// of it open (ERROR_SHARING_VIOLATION 0x80070020, ERROR_BUSY,
// ERROR_LOCK_VIOLATION), is in use; ERROR_ACCESS_DENIED (0x80070005) is
// os.ErrPermission. hcsshim's HcsError does not unwrap its Errno, so it is
// taken out here.
func layerErr(err error) error {
	if err == nil {
		return nil
	}
	var herr *hcsshim.HcsError
	if errors.As(err, &herr) {
		err = unwrappedHcsError{herr}
	}
	for _, e := range []error{windows.ERROR_SHARING_VIOLATION, windows.ERROR_BUSY, windows.ERROR_LOCK_VIOLATION} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %w", errLayerInUse, err)
		}
	}
	return err
}

type unwrappedHcsError struct{ *hcsshim.HcsError }

func (e unwrappedHcsError) Unwrap() error { return e.Err }
