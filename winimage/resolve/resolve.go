package resolve

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
)

// Arch is the CPU architecture of the manifests considered.
const Arch = "amd64"

// Image is an image as a host runs it.
type Image struct {
	// Desc is the manifest's descriptor: the target itself, or the index
	// entry chosen for the host.
	Desc     ocispec.Descriptor
	Manifest ocispec.Manifest
	Config   ocispec.Image
	// OSVersion is the Windows build the image was made for (see the
	// package doc), "" if neither its config nor its index says.
	OSVersion string
}

// ForHost reads the image target points at, an index or a manifest, from
// store as host runs it. The errors:
//
//   - an index has no manifest host can run: winbuild.BestManifest's
//     (errdefs.ErrNotFound), listing what the index offers;
//   - the target, or the entry chosen, is neither an index nor a
//     manifest: errdefs.ErrNotImplemented;
//   - a blob cannot be read or decoded: *BlobError.
//
// It does not judge the build: winbuild.Check(ref, host, OSVersion) does.
func ForHost(ctx context.Context, store content.Provider, target ocispec.Descriptor, host winbuild.Version) (Image, error) {
	var indexVersion string
	if images.IsIndexType(target.MediaType) {
		var index ocispec.Index
		if err := readJSON(ctx, store, "index", target, &index); err != nil {
			return Image{}, err
		}
		best, err := winbuild.BestManifest(host, Arch, index.Manifests)
		if err != nil {
			return Image{}, err
		}
		target = best
		if best.Platform != nil {
			indexVersion = best.Platform.OSVersion
		}
	}
	if !images.IsManifestType(target.MediaType) {
		return Image{}, fmt.Errorf("%s is neither an image index nor a manifest (%s): %w", target.Digest, target.MediaType, errdefs.ErrNotImplemented)
	}
	img := Image{Desc: target}
	if err := readJSON(ctx, store, "manifest", target, &img.Manifest); err != nil {
		return Image{}, err
	}
	if err := readJSON(ctx, store, "config", img.Manifest.Config, &img.Config); err != nil {
		return Image{}, err
	}
	img.OSVersion = winbuild.ImageOSVersion(img.Config.OSVersion, indexVersion)
	return img, nil
}

// BlobError is a blob of an image that could not be read or decoded.
type BlobError struct {
	// Blob says which: "index", "manifest" or "config".
	Blob string
	Desc ocispec.Descriptor
	// Err is the content store's error (errdefs.ErrNotFound for a blob
	// that is not there), or the decoder's, of class
	// errdefs.ErrInvalidArgument.
	Err error
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("read its %s %s: %v", e.Blob, e.Desc.Digest, e.Err)
}

func (e *BlobError) Unwrap() error { return e.Err }

func readJSON(ctx context.Context, store content.Provider, blob string, desc ocispec.Descriptor, v any) error {
	b, err := content.ReadBlob(ctx, store, desc)
	if err != nil {
		return &BlobError{Blob: blob, Desc: desc, Err: err}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return &BlobError{Blob: blob, Desc: desc, Err: fmt.Errorf("%v: %w", err, errdefs.ErrInvalidArgument)}
	}
	return nil
}
