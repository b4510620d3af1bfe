// Package differ is the windowsfilter layer differ: it imports Windows-format
// layer tars into the snapshots of package snapshotter (Apply) and writes
// a snapshot's changes back out as a layer (Compare). containerd reaches it
// as a diff proxy plugin beside the snapshotter.
//
// Before importing, Apply checks that the image the layer belongs to was
// built for a Windows build this host can run under process isolation
// (package winbuild). The unpack is the earliest point a snapshotter plugin
// can see the image: containerd's unpacker hands the differ each layer while
// the manifest that lists it, and that manifest's config, are already in the
// content store.
//
// It handles only the snapshots of its own snapshotter: the mounts of
// another (containerd's windows snapshotter's look the same) are
// NotImplemented, so containerd's diff service tries its next differ.
package differ

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/internal/iocount"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
)

// contentReadSize is how much of a layer one read of containerd's content
// store asks for.
const contentReadSize = 1 << 20

// ImageLister finds image records; containerd's images.Store is one.
type ImageLister interface {
	List(ctx context.Context, filters ...string) ([]images.Image, error)
}

// Differ implements containerd's diff.Applier and diff.Comparer for
// windowsfilter snapshots.
type Differ struct {
	content content.Store
	images  ImageLister
	host    winbuild.Version
	// snapshots is the directory holding the snapshotter's snapshots.
	snapshots string
}

var (
	_ diff.Applier  = (*Differ)(nil)
	_ diff.Comparer = (*Differ)(nil)
)

// New returns a differ for the snapshots of the snapshotter at root. It
// reads layers from and writes diffs to store, names images through imgs in
// its messages, and refuses images host cannot run.
func New(store content.Store, imgs ImageLister, host winbuild.Version, root string) *Differ {
	return &Differ{content: store, images: imgs, host: host, snapshots: layermount.SnapshotsDir(root)}
}

// Apply imports the layer desc into the windows-layer mount of an unpack
// snapshot and returns the descriptor of the uncompressed layer, whose
// digest containerd compares with the image's diff ID.
func (d *Differ) Apply(ctx context.Context, desc ocispec.Descriptor, mounts []mount.Mount, opts ...diff.ApplyOpt) (ocispec.Descriptor, error) {
	start := time.Now()
	layer, err := layermount.Decode(mounts)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if err := d.own(layer); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("apply layer %s: %w", desc.Digest, err)
	}
	if layer.ReadOnly {
		return ocispec.Descriptor{}, fmt.Errorf("apply layer %s: target %s is read-only: %w", desc.Digest, layer.Path, errdefs.ErrInvalidArgument)
	}
	var config diff.ApplyConfig
	for _, o := range opts {
		if err := o(ctx, desc, &config); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("apply layer %s: %w", desc.Digest, err)
		}
	}
	if _, err := images.DiffCompression(ctx, desc.MediaType); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("apply layer %s: %w", desc.Digest, err)
	}
	if err := d.checkBuild(ctx, desc.Digest); err != nil {
		if err := d.refuseBaseLayer(ctx, desc, err); err != nil {
			return ocispec.Descriptor{}, err
		}
	}

	ra, err := d.content.ReaderAt(ctx, desc)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("read layer %s from the content store: %w", desc.Digest, err)
	}
	defer ra.Close()
	// Every read of the content store is a gRPC stream to containerd: read
	// it in large pieces rather than the decompressor's 32 KiB.
	dr, err := compression.DecompressStream(bufio.NewReaderSize(content.NewReader(ra), contentReadSize))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("decompress layer %s: %w", desc.Digest, err)
	}
	defer dr.Close()

	digester := digest.Canonical.Digester()
	ahead := readAhead(io.TeeReader(dr, digester.Hash()))
	defer ahead.Close()
	counted := &iocount.Reader{R: ahead}
	if _, err := importLayer(ctx, counted, layer); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("import layer %s into %s: %w", desc.Digest, layer.Path, err)
	}
	// The tar reader stops at the end-of-archive marker; the diff ID covers
	// every byte of the uncompressed stream, padding included.
	if _, err := io.Copy(io.Discard, counted); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("read end of layer %s: %w", desc.Digest, err)
	}

	applied := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer, Size: counted.N, Digest: digester.Digest()}
	log.G(ctx).WithFields(log.Fields{
		"layer":    desc.Digest,
		"diffID":   applied.Digest,
		"bytes":    applied.Size,
		"duration": time.Since(start),
	}).Debug("layer applied")
	return applied, nil
}

// own declines (NotImplemented) a snapshot of another snapshotter, such as
// containerd's own windows snapshotter, whose mounts look the same: as
// containerd's differs do with mounts they do not handle
// (plugins/diff/windows/windows.go, mountsToLayerAndParents), so its diff
// service tries the next differ of its chain. A refusal of ours (the build check) would end
// the chain instead.
func (d *Differ) own(l layermount.Layer) error {
	dir := filepath.Dir(filepath.Clean(l.Path))
	// Windows paths compare without case.
	if dir == d.snapshots || (runtime.GOOS == "windows" && strings.EqualFold(dir, d.snapshots)) {
		return nil
	}
	return fmt.Errorf("%s is not a snapshot of winproc's snapshotter (its snapshots are in %s); leaving it to the next differ: %w", l.Path, d.snapshots, errdefs.ErrNotImplemented)
}
