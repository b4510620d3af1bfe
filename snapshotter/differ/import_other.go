//go:build !windows

package differ

import (
	"context"
	"io"

	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/snapshotter/wclayer"
)

// importLayer writes the layer tar into the emulation's plain directories.
func importLayer(ctx context.Context, r io.Reader, layer layermount.Layer) (int64, error) {
	return wclayer.Import(ctx, r, layer.Path)
}
