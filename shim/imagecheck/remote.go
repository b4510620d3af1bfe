package imagecheck

import (
	"context"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
)

// Remote reads the records from containerd over conn. It uses the API
// clients directly: containerd's client package would bring a hundred
// packages' start-up cost into every shim for two lookups.
func Remote(conn grpc.ClientConnInterface) Records {
	return remote{containers: containersapi.NewContainersClient(conn), images: imagesapi.NewImagesClient(conn)}
}

type remote struct {
	containers containersapi.ContainersClient
	images     imagesapi.ImagesClient
}

func (r remote) ContainerImage(ctx context.Context, id string) (string, error) {
	resp, err := r.containers.Get(ctx, &containersapi.GetContainerRequest{ID: id})
	if err != nil {
		return "", errgrpc.ToNative(err)
	}
	return resp.GetContainer().GetImage(), nil
}

func (r remote) ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error) {
	resp, err := r.images.Get(ctx, &imagesapi.GetImageRequest{Name: name})
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
