// Package imagecheck refuses, when the shim creates a task, a container
// whose image was built for a Windows build the host cannot run under
// process isolation. The snapshotter's differ refuses such images at unpack
// already; this is the second line, for images unpacked elsewhere or before
// winproc was installed, and it turns HCS's late 0xc0370101 into winbuild's
// message.
package imagecheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage/resolve"
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
	Content content.Provider
}

// Check looks up container id's image and checks the Windows build it was
// made for (its config's os.version, else its index entry's; see package
// winimage/resolve) against host. A container without an image (created
// from a rootfs only) passes; an image that is gone, or declares no build,
// passes with a warning.
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
	// Judge the manifest this host would run, not an index's first windows
	// entry.
	img, err := resolve.ForHost(ctx, s.Content, target, host)
	var blob *resolve.BlobError
	switch {
	case errors.As(err, &blob):
		return fmt.Errorf("read the %s of image %s: %w", blob.Blob, ref, blob.Err)
	case err != nil:
		return fmt.Errorf("image %s: %w", ref, err)
	}
	err = winbuild.Check(ref, host, img.OSVersion)
	if errors.Is(err, winbuild.ErrUnknownBuild) {
		log.G(ctx).WithField("container", id).Warn(err.Error())
		return nil
	}
	return err
}
