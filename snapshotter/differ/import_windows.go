//go:build windows

package differ

import (
	"context"
	"fmt"
	"io"

	"github.com/Microsoft/go-winio"
	"github.com/Microsoft/hcsshim/pkg/ociwclayer"

	"github.com/winproc/winproc/internal/dllguard"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// importLayer writes the layer tar through HCS's layer writer, which needs
// the backup and restore privileges to set security descriptors and
// attributes as the tar records them.
func importLayer(ctx context.Context, r io.Reader, layer layermount.Layer) (int64, error) {
	if err := winio.EnableProcessPrivileges([]string{winio.SeBackupPrivilege, winio.SeRestorePrivilege}); err != nil {
		return 0, fmt.Errorf("enable backup and restore privileges: %w", err)
	}
	var n int64
	err := dllguard.Call("import layer", func() (err error) {
		n, err = ociwclayer.ImportLayerFromTar(ctx, r, layer.Path, layer.Parents)
		return err
	})
	return n, err
}
