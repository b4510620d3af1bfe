package winimage

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/winproc/winproc/snapshotter/layertar"
)

// DefaultCreated is the time written into layers, configs and history when
// none is given: the Unix epoch, so that builds are reproducible.
var DefaultCreated = time.Unix(0, 0).UTC()

// SyntheticBaseMarker is the file, relative to C:\ and with '/' separators,
// that marks the synthetic base layer (see SyntheticBaseLayer). Its content
// is SyntheticBaseMarkerContent.
const SyntheticBaseMarker = "Windows/System32/winproc-base.txt"

// SyntheticBaseMarkerContent is the content of SyntheticBaseMarker.
const SyntheticBaseMarkerContent = "winproc synthetic Windows base layer\r\n"

// syntheticBaseDirs are the directories of the synthetic base layer.
var syntheticBaseDirs = []string{"ProgramData", "Users", "Windows/System32"}

// LayerOption configures LayerFromTree.
type LayerOption func(*layerConfig)

type layerConfig struct {
	created time.Time
	base    bool
}

// WithCreated sets the time written for every entry of the layer (mtime,
// atime, ctime and creation time). The default is DefaultCreated.
func WithCreated(t time.Time) LayerOption {
	return func(c *layerConfig) { c.created = t }
}

// AsBaseLayer adds an empty Hives/ directory, as base layers have.
func AsBaseLayer() LayerOption {
	return func(c *layerConfig) { c.base = true }
}

// LayerFromTree returns a gzip-compressed Windows-format layer whose Files/
// is the directory tree dir: dir/pause.exe is C:\pause.exe in the
// container. Windows metadata stored in extended attributes (see package
// wclayer) is kept; everything else gets default attributes. The layer's
// media type is the OCI gzip layer type (Append switches to the Docker type
// for Docker-format bases). The compressed layer is held in memory.
func LayerFromTree(ctx context.Context, dir string, opts ...LayerOption) (v1.Layer, error) {
	cfg := layerConfig{created: DefaultCreated}
	for _, o := range opts {
		o(&cfg)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("layer tree: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("layer tree %s: not a directory", dir)
	}
	eopts := []layertar.ExportOption{layertar.WithTimestamp(cfg.created)}
	if cfg.base {
		eopts = append(eopts, layertar.WithEmptyHives())
	}
	var buf bytes.Buffer
	// The gzip header has no name and a zero mtime, so the output only
	// depends on the tar.
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := layertar.FromTree(ctx, zw, dir, eopts...); err != nil {
		return nil, fmt.Errorf("layer tree %s: %w", dir, err)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return layerFromGzip(buf.Bytes())
}

// layerFromGzip returns a layer whose compressed blob is data.
func layerFromGzip(data []byte) (v1.Layer, error) {
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	l, err := tarball.LayerFromOpener(open, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}

// SyntheticBaseLayer returns a minimal base layer: the directories
// ProgramData\, Users\ and Windows\System32\, the marker file
// C:\Windows\System32\winproc-base.txt (SyntheticBaseMarker) and an empty
// Hives\, every time set to created (DefaultCreated if zero). It is a valid
// Windows-format base layer but not a Windows installation: it is meant for
// the Linux emulation, which backs C: with Wine's drive_c.
func SyntheticBaseLayer(ctx context.Context, created time.Time) (v1.Layer, error) {
	if created.IsZero() {
		created = DefaultCreated
	}
	dir, err := os.MkdirTemp("", "winimage-base-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, d := range syntheticBaseDirs {
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return nil, err
		}
	}
	marker := filepath.Join(dir, filepath.FromSlash(SyntheticBaseMarker))
	if err := os.WriteFile(marker, []byte(SyntheticBaseMarkerContent), 0o644); err != nil {
		return nil, err
	}
	return LayerFromTree(ctx, dir, WithCreated(created), AsBaseLayer())
}
