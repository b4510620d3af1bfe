package resolve

import (
	"context"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
)

// Target returns the target of containerd's image record name, the index or
// manifest ForHost reads, through the images API client over conn:
// containerd's client package would bring a hundred packages' start-up cost
// into every shim for one lookup. ctx carries the namespace as outgoing gRPC
// metadata (namespaces.WithNamespace). Errors are errdefs classes:
// errdefs.ErrNotFound for an image containerd does not have.
func Target(ctx context.Context, conn grpc.ClientConnInterface, name string) (ocispec.Descriptor, error) {
	resp, err := imagesapi.NewImagesClient(conn).Get(ctx, &imagesapi.GetImageRequest{Name: name})
	if err != nil {
		return ocispec.Descriptor{}, errgrpc.ToNative(err)
	}
	t := resp.GetImage().GetTarget()
	return ocispec.Descriptor{
		MediaType:   t.GetMediaType(),
		Digest:      digest.Digest(t.GetDigest()),
		Size:        t.GetSize(),
		Annotations: t.GetAnnotations(),
	}, nil
}
