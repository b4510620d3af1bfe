package doctor

import (
	"context"
	"fmt"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	introspectionapi "github.com/containerd/containerd/api/services/introspection/v1"
	namespacesapi "github.com/containerd/containerd/api/services/namespaces/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	tasksapi "github.com/containerd/containerd/api/services/tasks/v1"
	versionapi "github.com/containerd/containerd/api/services/version/v1"
	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/content"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	criapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/winimage/resolve"
)

// runtimePluginType and runtimePluginID name containerd's task runtime,
// which answers runtime info requests (ctr plugins inspect-runtime).
const (
	runtimePluginType = "io.containerd.runtime.v2"
	runtimePluginID   = "task"
)

// grpcContainerd talks to containerd through its API clients over one gRPC
// connection (no containerd client package).
type grpcContainerd struct {
	conn *grpc.ClientConn
}

func dialContainerd(address string) (Containerd, error) {
	conn, err := containerdconn.Dial(address, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return &grpcContainerd{conn: conn}, nil
}

func (c *grpcContainerd) Close() error { return c.conn.Close() }

func (c *grpcContainerd) Version(ctx context.Context) (string, string, error) {
	resp, err := versionapi.NewVersionClient(c.conn).Version(ctx, &emptypb.Empty{})
	if err != nil {
		return "", "", errgrpc.ToNative(err)
	}
	return resp.GetVersion(), resp.GetRevision(), nil
}

func (c *grpcContainerd) Plugins(ctx context.Context, filter string) ([]Plugin, error) {
	resp, err := introspectionapi.NewIntrospectionClient(c.conn).Plugins(ctx, &introspectionapi.PluginsRequest{Filters: []string{filter}})
	if err != nil {
		return nil, errgrpc.ToNative(err)
	}
	var out []Plugin
	for _, p := range resp.GetPlugins() {
		pl := Plugin{Type: p.GetType(), ID: p.GetID()}
		for _, pf := range p.GetPlatforms() {
			s := pf.GetOS() + "/" + pf.GetArchitecture()
			if pf.GetVariant() != "" {
				s += "/" + pf.GetVariant()
			}
			pl.Platforms = append(pl.Platforms, s)
		}
		if e := p.GetInitErr(); e != nil {
			pl.InitErr = e.GetMessage()
			if pl.InitErr == "" {
				pl.InitErr = fmt.Sprintf("code %d", e.GetCode())
			}
		}
		out = append(out, pl)
	}
	return out, nil
}

func (c *grpcContainerd) RuntimeInfo(ctx context.Context, runtime string) (ShimInfo, error) {
	opts, err := typeurl.MarshalAnyToProto(&apitypes.RuntimeRequest{RuntimePath: runtime})
	if err != nil {
		return ShimInfo{}, err
	}
	resp, err := introspectionapi.NewIntrospectionClient(c.conn).PluginInfo(ctx, &introspectionapi.PluginInfoRequest{
		Type: runtimePluginType, ID: runtimePluginID, Options: opts,
	})
	if err != nil {
		return ShimInfo{}, errgrpc.ToNative(err)
	}
	var info apitypes.RuntimeInfo
	if err := typeurl.UnmarshalTo(resp.GetExtra(), &info); err != nil {
		return ShimInfo{}, fmt.Errorf("containerd's runtime info: %w", err)
	}
	return shimInfoOf(&info), nil
}

func (c *grpcContainerd) RuntimeHandlers(ctx context.Context) ([]string, error) {
	resp, err := criapi.NewRuntimeServiceClient(c.conn).Status(ctx, &criapi.StatusRequest{})
	if err != nil {
		return nil, errgrpc.ToNative(err)
	}
	var names []string
	for _, h := range resp.GetRuntimeHandlers() {
		names = append(names, h.GetName())
	}
	return names, nil
}

func (c *grpcContainerd) ImageTarget(ctx context.Context, ns, name string) (ocispec.Descriptor, error) {
	return resolve.Target(namespaces.WithNamespace(ctx, ns), c.conn, name)
}

func (c *grpcContainerd) Content(ns string) content.Provider {
	return nsProvider{store: contentproxy.NewContentStore(contentapi.NewContentClient(c.conn)), ns: ns}
}

// nsProvider is containerd's content store as namespace ns sees it.
type nsProvider struct {
	store content.Provider
	ns    string
}

func (p nsProvider) ReaderAt(ctx context.Context, desc ocispec.Descriptor) (content.ReaderAt, error) {
	return p.store.ReaderAt(namespaces.WithNamespace(ctx, p.ns), desc)
}

func (c *grpcContainerd) StatSnapshot(ctx context.Context, ns, snapshotter, key string) error {
	_, err := snapshotsapi.NewSnapshotsClient(c.conn).Stat(namespaces.WithNamespace(ctx, ns), &snapshotsapi.StatSnapshotRequest{Snapshotter: snapshotter, Key: key})
	return errgrpc.ToNative(err)
}

func (c *grpcContainerd) Tasks(ctx context.Context, ns string) ([]string, error) {
	all := []string{ns}
	if ns == "" {
		var err error
		if all, err = c.namespaces(ctx); err != nil {
			return nil, err
		}
	}
	var ids []string
	for _, ns := range all {
		resp, err := tasksapi.NewTasksClient(c.conn).List(namespaces.WithNamespace(ctx, ns), &tasksapi.ListTasksRequest{})
		if err != nil {
			return nil, errgrpc.ToNative(err)
		}
		for _, t := range resp.GetTasks() {
			ids = append(ids, t.GetID())
		}
	}
	return ids, nil
}

// namespaces lists containerd's namespaces.
func (c *grpcContainerd) namespaces(ctx context.Context) ([]string, error) {
	resp, err := namespacesapi.NewNamespacesClient(c.conn).List(ctx, &namespacesapi.ListNamespacesRequest{})
	if err != nil {
		return nil, errgrpc.ToNative(err)
	}
	var all []string
	for _, n := range resp.GetNamespaces() {
		all = append(all, n.GetName())
	}
	return all, nil
}
