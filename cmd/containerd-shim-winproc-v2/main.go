// Command containerd-shim-winproc-v2 is winproc's containerd runtime v2 shim
// (runtime_type io.containerd.winproc.v2): one shim per pod, its containers
// compute systems behind package compute.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/containerd/v2/plugins"
	"github.com/containerd/plugin"
	"github.com/containerd/plugin/registry"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/imagecheck"
	"github.com/winproc/winproc/shim/manager"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/shim/pauseimage"
	"github.com/winproc/winproc/shim/sandbox"
	"github.com/winproc/winproc/shim/task"
)

func main() {
	m := manager.New(containerdnames.RuntimeType, openBackend, releasePauseRootfs)
	// containerd before 2.3 starts shims by a protocol pkg/shim refuses.
	if handled, err := startLegacy(context.Background(), m); handled {
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s", m.Name(), err)
			os.Exit(1)
		}
		return
	}
	shim.RunShim(context.Background(), m, func(c *shim.Config) {
		// pkg/shim's reaper waits for any child and would take exit
		// statuses from the backends, which wait for their own processes
		// (the emulation also reaps the orphans it knows, precisely).
		c.NoReaper = true
	})
}

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
	backend, err := newBackend(ic.Context, opts)
	if err != nil {
		return nil, err
	}
	host, err := hostBuild(opts)
	if err != nil {
		return nil, err
	}

	// The image check reads containerd's records; the connection is made
	// on first use and closed with the shim.
	conn, err := dialContainerd(ic.Properties[plugins.PropertyGRPCAddress])
	if err != nil {
		return nil, err
	}
	sd.(shutdown.Service).RegisterCallback(func(context.Context) error { return conn.Close() })
	stores := imagecheck.Stores{Records: imagecheck.Remote(conn), Content: contentproxy.NewContentStore(conn)}
	check := func(ctx context.Context, id string) error {
		// A ttrpc request's namespace does not travel on outgoing gRPC
		// calls by itself.
		if ns, ok := namespaces.Namespace(ctx); ok {
			ctx = namespaces.WithNamespace(ctx, ns)
		}
		return imagecheck.Check(ctx, stores, host, id)
	}
	tasks := task.New(backend, publisher.(shim.Publisher), sd.(shutdown.Service), check)
	prepare := func(ctx context.Context, image, id string) (*pauseimage.Rootfs, func(context.Context) error, error) {
		return pauseimage.Prepare(ctx, conn, containerdnames.Snapshotter, image, id, host)
	}
	return services{tasks: tasks, sandbox: sandbox.New(tasks, prepare, opts.PauseImage, host)}, nil
}

// dialContainerd sets up a connection to containerd's gRPC API at address;
// it connects on first use.
func dialContainerd(address string) (*grpc.ClientConn, error) {
	conn, err := containerdconn.Dial(address)
	if err != nil {
		return nil, fmt.Errorf("containerd: %w", err)
	}
	return conn, nil
}

// releasePauseRootfs is what `delete` releases in containerd after a dead
// shim: when id is a sandbox the shim owned, its pause rootfs (snapshot and
// lease), which nothing else would ever remove. containerd passes its
// address to `delete` as the -address flag, which pkg/shim has parsed.
func releasePauseRootfs(ctx context.Context, id string) error {
	f := flag.Lookup("address")
	if f == nil || f.Value.String() == "" {
		return fmt.Errorf("no containerd address (-address) to release the pause rootfs of %s", id)
	}
	conn, err := dialContainerd(f.Value.String())
	if err != nil {
		return err
	}
	defer conn.Close()
	return pauseimage.Release(ctx, conn, containerdnames.Snapshotter, id)
}
