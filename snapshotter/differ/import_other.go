//go:build !windows

package differ

import (
	"context"
	"io"

	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/snapshotter/layertar"
)

// importLayer writes the layer tar into the emulation's plain directories.
func importLayer(ctx context.Context, r io.Reader, layer layermount.Layer) (int64, error) {
	return layertar.Import(ctx, r, layer.Path)
}
