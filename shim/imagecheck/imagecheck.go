// Package imagecheck refuses, when the shim creates a task, a container
// whose image was built for a Windows build the host cannot run under
// process isolation. The snapshotter's differ refuses such images at unpack
// already; this is the second line, for images unpacked elsewhere or before
// winproc was installed, and it turns HCS's late 0xc0370101 into winbuild's
// message.
package imagecheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
)

// Records are the containerd records the check reads: a container's image
// name and an image's target.
type Records interface {
	// ContainerImage returns the image container id was made from, "" if
	// none.
	ContainerImage(ctx context.Context, id string) (string, error)
	// ImageTarget returns the manifest or index image name points at.
	ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error)
}

// Stores are the containerd services the check reads.
type Stores struct {
	Records Records
	Content content.Store
}

// Check looks up container id's image and checks its os.version against
// host. A container without an image (created from a rootfs only), or an
// image that declares no os.version, passes with a warning.
func Check(ctx context.Context, s Stores, host winbuild.Version, id string) error {
	ref, err := s.Records.ContainerImage(ctx, id)
	if err != nil {
		return fmt.Errorf("look up container %s for its image: %w", id, err)
	}
	if ref == "" {
		return nil
	}
	target, err := s.Records.ImageTarget(ctx, ref)
	if errdefs.IsNotFound(err) {
		log.G(ctx).WithField("image", ref).Warn("the container's image is gone; skipping the Windows build check")
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up image %s: %w", ref, err)
	}
	if images.IsIndexType(target.MediaType) {
		// Judge the manifest this host would run, not the index's first
		// windows entry.
		var index ocispec.Index
		if err := readJSON(ctx, s.Content, target, &index); err != nil {
			return fmt.Errorf("read the index of image %s: %w", ref, err)
		}
		if target, err = winbuild.BestManifest(host, "amd64", index.Manifests); err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
	}
	var manifest ocispec.Manifest
	if err := readJSON(ctx, s.Content, target, &manifest); err != nil {
		return fmt.Errorf("read the manifest of image %s: %w", ref, err)
	}
	var config ocispec.Image
	if err := readJSON(ctx, s.Content, manifest.Config, &config); err != nil {
		return fmt.Errorf("read the config of image %s: %w", ref, err)
	}
	err = winbuild.Check(ref, host, config.OSVersion)
	if errors.Is(err, winbuild.ErrUnknownBuild) {
		log.G(ctx).WithField("container", id).Warn(err.Error())
		return nil
	}
	return err
}

func readJSON(ctx context.Context, store content.Store, desc ocispec.Descriptor, v any) error {
	b, err := content.ReadBlob(ctx, store, desc)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
