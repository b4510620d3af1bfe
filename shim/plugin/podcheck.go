package plugin

import (
	"context"
	"fmt"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/cri"
)

// podCheck validates, in podsandbox mode, the pod config containerd's CRI
// recorded on the pause container (cri.SandboxMetadataExtension) with the
// sandbox service's own cri.FromConfig: the pause container's spec carries
// the pod's user, but not its Linux fields (privileged, sysctls, host
// namespaces), which shim mode refuses. A pause container without the
// extension (not made by CRI) passes.
func podCheck(conn grpc.ClientConnInterface) func(ctx context.Context, id string) error {
	containers := containersapi.NewContainersClient(conn)
	return func(ctx context.Context, id string) error {
		// A ttrpc request's namespace does not travel on outgoing gRPC
		// calls by itself.
		if ns, ok := namespaces.Namespace(ctx); ok {
			ctx = namespaces.WithNamespace(ctx, ns)
		}
		resp, err := containers.Get(ctx, &containersapi.GetContainerRequest{ID: id})
		if err != nil {
			return fmt.Errorf("look up pause container %s for its pod config: %w", id, errgrpc.ToNative(err))
		}
		ext, ok := resp.GetContainer().GetExtensions()[cri.SandboxMetadataExtension]
		if !ok {
			return nil
		}
		cfg, err := cri.FromSandboxMetadata(ext.GetValue())
		if err != nil {
			return err
		}
		_, err = cri.FromConfig(cfg)
		return err
	}
}
