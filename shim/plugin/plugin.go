// Package plugin registers the shim's ttrpc services with pkg/shim, as
// containerd's runc shim's task/plugin does: it assembles the task service
// and the pod's sandbox service over it from the handler's options, the
// compute backend, and containerd's image records (the image check and the
// pause image). The shim's main imports it for that effect.
package plugin

import (
	"context"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/containerd/ttrpc"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/backend"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/imagecheck"
	"github.com/winproc/winproc/shim/manager"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/shim/pauseimage"
	"github.com/winproc/winproc/shim/sandbox"
	"github.com/winproc/winproc/shim/task"
)

func init() {
	registry.Register(&plugin.Registration{
		Type:     plugins.TTRPCPlugin,
		ID:       "winproc",
		Requires: []plugin.Type{plugins.EventPlugin, plugins.InternalPlugin},
		InitFn:   newServices,
	})
}

// services are the shim's APIs: tasks, and the pod's sandbox over them.
type services struct {
	tasks   *task.Service
	sandbox *sandbox.Service
}

func (s services) RegisterTTRPC(server *ttrpc.Server) error {
	if err := s.tasks.RegisterTTRPC(server); err != nil {
		return err
	}
	return s.sandbox.RegisterTTRPC(server)
}

func newServices(ic *plugin.InitContext) (any, error) {
	publisher, err := ic.GetByID(plugins.EventPlugin, "publisher")
	if err != nil {
		return nil, err
	}
	sd, err := ic.GetByID(plugins.InternalPlugin, "shutdown")
	if err != nil {
		return nil, err
	}
	opts, err := options.Decode([]byte(os.Getenv(options.Env)))
	if err != nil {
		return nil, err
	}
	b, err := backend.New(ic.Context, opts)
	if err != nil {
		return nil, err
	}
	if d, ok := b.(compute.Drainer); ok {
		// Teardowns carried on in the background end before the shim
		// does, within shutdown's bound on its callbacks.
		sd.(shutdown.Service).RegisterCallback(d.Drain)
	}
	if cleanup := manager.SocketCleanup(); cleanup != nil {
		sd.(shutdown.Service).RegisterCallback(cleanup)
	}
	host, err := backend.HostBuild(opts)
	if err != nil {
		return nil, err
	}

	// The image check reads containerd's records at every task create.
	// The connection is made now, in the background, so the first create
	// does not wait for the pipe and HTTP/2's handshake; it is closed with
	// the shim.
	conn, err := containerdconn.Dial(ic.Properties[plugins.PropertyGRPCAddress])
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	conn.Connect()
	sd.(shutdown.Service).RegisterCallback(func(context.Context) error { return conn.Close() })
	stores := imagecheck.RemoteStores(conn)
	check := func(ctx context.Context, id string) error {
		// A ttrpc request's namespace does not travel on outgoing gRPC
		// calls by itself.
		if ns, ok := namespaces.Namespace(ctx); ok {
			ctx = namespaces.WithNamespace(ctx, ns)
		}
		return imagecheck.Check(ctx, stores, host, id)
	}
	tasks := task.New(b, publisher.(shim.Publisher), sd.(shutdown.Service), check)
	tasks.SetPodCheck(podCheck(conn))
	prepare := func(ctx context.Context, image, id string) (*pauseimage.Rootfs, func(context.Context) error, error) {
		return pauseimage.Prepare(ctx, conn, containerdnames.Snapshotter, image, id, host)
	}
	return services{tasks: tasks, sandbox: sandbox.New(tasks, prepare, opts.PauseImage, host)}, nil
}
