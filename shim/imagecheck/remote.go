package imagecheck

import (
	"context"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/errdefs/pkg/errgrpc"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/winimage/resolve"
)

// RemoteStores are the stores the check reads from containerd over conn,
// as the shim reads them.
func RemoteStores(conn *grpc.ClientConn) Stores {
	return Stores{Records: Remote(conn), Content: contentproxy.NewContentStore(conn)}
}

// Remote reads the records from containerd over conn. It uses the API
// clients directly: containerd's client package would bring a hundred
// packages' start-up cost into every shim for two lookups.
func Remote(conn grpc.ClientConnInterface) Records {
	return remote{conn: conn, containers: containersapi.NewContainersClient(conn)}
}

type remote struct {
	conn       grpc.ClientConnInterface
	containers containersapi.ContainersClient
}

func (r remote) ContainerImage(ctx context.Context, id string) (string, error) {
	resp, err := r.containers.Get(ctx, &containersapi.GetContainerRequest{ID: id})
	if err != nil {
		return "", errgrpc.ToNative(err)
	}
	return resp.GetContainer().GetImage(), nil
}

func (r remote) ImageTarget(ctx context.Context, name string) (ocispec.Descriptor, error) {
	return resolve.Target(ctx, r.conn, name)
}
