package differ

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/labels"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// Compare writes the changes of the upper snapshot over the lower one as a
// Windows-format layer into the content store. upper must sit directly on
// the layers of lower: its own directory is the diff.
func (d *Differ) Compare(ctx context.Context, lower, upper []mount.Mount, opts ...diff.Opt) (_ ocispec.Descriptor, retErr error) {
	var config diff.Config
	for _, o := range opts {
		if err := o(&config); err != nil {
			return ocispec.Descriptor{}, err
		}
	}
	layer, err := d.diffLayer(lower, upper)
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	if config.MediaType == "" {
		config.MediaType = ocispec.MediaTypeImageLayerGzip
	}
	var algorithm compression.Compression
	switch config.MediaType {
	case ocispec.MediaTypeImageLayer:
		algorithm = compression.Uncompressed
	case ocispec.MediaTypeImageLayerGzip:
		algorithm = compression.Gzip
	case ocispec.MediaTypeImageLayerZstd:
		algorithm = compression.Zstd
	default:
		return ocispec.Descriptor{}, fmt.Errorf("diff media type %q: only uncompressed, gzip and zstd layers are written: %w", config.MediaType, errdefs.ErrNotImplemented)
	}

	ref := config.Reference
	if ref == "" {
		ref = uniqueRef()
	}
	cw, err := content.OpenWriter(ctx, d.content, content.WithRef(ref), content.WithDescriptor(ocispec.Descriptor{MediaType: config.MediaType}))
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("open content writer %s: %w", ref, err)
	}
	defer func() {
		cw.Close()
		if retErr != nil {
			if err := d.content.Abort(ctx, ref); err != nil && !errdefs.IsNotFound(err) {
				log.G(ctx).WithError(err).WithField("ref", ref).Warn("abort diff upload")
			}
		}
	}()
	if err := cw.Truncate(0); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("reset content writer %s: %w", ref, err)
	}

	compressed, err := compression.CompressStream(cw, algorithm)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("compress diff: %w", err)
	}
	uncompressed := digest.Canonical.Digester()
	err = exportLayer(ctx, io.MultiWriter(compressed, uncompressed.Hash()), layer)
	if closeErr := compressed.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("write diff of %s: %w", layer.Path, err)
	}

	commitLabels := map[string]string{labels.LabelUncompressed: uncompressed.Digest().String()}
	for k, v := range config.Labels {
		commitLabels[k] = v
	}
	dgst := cw.Digest()
	if err := cw.Commit(ctx, 0, dgst, content.WithLabels(commitLabels)); err != nil && !errdefs.IsAlreadyExists(err) {
		return ocispec.Descriptor{}, fmt.Errorf("commit diff %s: %w", dgst, err)
	}
	info, err := d.content.Info(ctx, dgst)
	if err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("stat diff %s: %w", dgst, err)
	}
	if info.Labels[labels.LabelUncompressed] == "" {
		// The same blob existed already without the label.
		info.Labels = map[string]string{labels.LabelUncompressed: uncompressed.Digest().String()}
		if _, err := d.content.Update(ctx, info, "labels."+labels.LabelUncompressed); err != nil {
			return ocispec.Descriptor{}, fmt.Errorf("label diff %s: %w", dgst, err)
		}
	}
	return ocispec.Descriptor{MediaType: config.MediaType, Size: info.Size, Digest: dgst}, nil
}

// diffLayer checks that upper sits on exactly the layers of lower and returns
// upper's layer, whose own directory holds the changes.
func (d *Differ) diffLayer(lower, upper []mount.Mount) (layermount.Layer, error) {
	up, err := layermount.Decode(upper)
	if err != nil {
		return layermount.Layer{}, fmt.Errorf("upper: %w", err)
	}
	if err := d.own(up); err != nil {
		return layermount.Layer{}, fmt.Errorf("upper: %w", err)
	}
	low, err := layermount.Decode(lower)
	if err != nil {
		return layermount.Layer{}, fmt.Errorf("lower: %w", err)
	}
	// A view stands for its parents; an active or committed layer for
	// itself on top of them.
	stack := low.Parents
	if !low.ReadOnly {
		stack = append([]string{low.Path}, low.Parents...)
	}
	if !slices.Equal(stack, up.Parents) {
		return layermount.Layer{}, fmt.Errorf("upper %s does not sit directly on the lower layers %v (its parents are %v): %w", up.Path, stack, up.Parents, errdefs.ErrInvalidArgument)
	}
	return up, nil
}

func uniqueRef() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "winproc-diff-" + hex.EncodeToString(b)
}
