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

// exportLayer writes the layer's changes through HCS's layer reader, which
// needs the backup privilege to read security descriptors.
func exportLayer(ctx context.Context, w io.Writer, layer layermount.Layer) error {
	if err := winio.EnableProcessPrivileges([]string{winio.SeBackupPrivilege}); err != nil {
		return fmt.Errorf("enable backup privilege: %w", err)
	}
	return dllguard.Call("export layer", func() error { return ociwclayer.ExportLayerToTar(ctx, w, layer.Path, layer.Parents) })
}
