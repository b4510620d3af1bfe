//go:build !windows

package differ

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/snapshotter/layertar"
)

// exportLayer writes the layer's changes. A container's scratch (its
// overlay work directory still present) is an overlay upper directory; a
// committed layer is what the importer wrote, metadata sidecar included.
func exportLayer(ctx context.Context, w io.Writer, layer layermount.Layer) error {
	if _, err := os.Stat(filepath.Join(layer.Path, layermount.ScratchWork)); err == nil {
		return layertar.ExportDiff(ctx, w, filepath.Join(layer.Path, layermount.ScratchUpper))
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return layertar.Export(ctx, w, layer.Path)
}
