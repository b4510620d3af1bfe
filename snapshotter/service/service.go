// Package service serves the windowsfilter snapshotter and its differ to
// containerd on one socket, as the two proxy plugins
//
//	[proxy_plugins.windowsfilter]      type = "snapshot"
//	[proxy_plugins.windowsfilter-diff] type = "diff"
//
// The differ reads layer blobs from containerd's content store, so the
// service also holds a connection to containerd. That connection is made
// lazily: the snapshotter normally starts before containerd.
package service

import (
	"context"
	"errors"
	"fmt"

	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/contrib/diffservice"
	"github.com/containerd/containerd/v2/contrib/snapshotservice"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/log"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/snapshotter"
	"github.com/winproc/winproc/snapshotter/differ"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
)

// Config says where the service keeps its state and whom it talks to.
type Config struct {
	// Root is the snapshotter's state directory.
	Root string
	// Address is where containerd reaches the service: a unix socket path,
	// or a named pipe on Windows.
	Address string
	// ContainerdAddress is containerd's gRPC address, for layer content.
	ContainerdAddress string
	// Host is the Windows build images must be compatible with.
	Host winbuild.Version
}

// Run serves until ctx ends, then stops gracefully and releases everything
// it opened.
func Run(ctx context.Context, cfg Config) error {
	sn, err := snapshotter.New(ctx, cfg.Root)
	if err != nil {
		return err
	}
	defer sn.Close()

	conn, err := containerdconn.Dial(cfg.ContainerdAddress)
	if err != nil {
		return fmt.Errorf("containerd for layer content: %w", err)
	}
	defer conn.Close()
	d := differ.New(
		contentproxy.NewContentStore(conn),
		client.NewImageStoreFromClient(imagesapi.NewImagesClient(conn)),
		cfg.Host,
		sn.Root(),
	)

	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(forwardNamespace),
		grpc.ChainStreamInterceptor(forwardNamespaceStream),
	)
	snapshotsapi.RegisterSnapshotsServer(srv, snapshotservice.FromSnapshotter(sn))
	diffapi.RegisterDiffServer(srv, diffservice.FromApplierAndComparer(applier{d, sn}, d))

	l, err := listen(cfg.Address)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Address, err)
	}
	log.G(ctx).WithFields(log.Fields{
		"address": cfg.Address,
		"root":    cfg.Root,
		"host":    cfg.Host.Label(),
	}).Info("serving windowsfilter snapshotter and differ")

	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", cfg.Address, err)
	case <-ctx.Done():
	}
	srv.GracefulStop()
	if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// applier tells the snapshotter which snapshot a layer is being applied
// into: a pull waiting for that extraction keeps waiting while it lasts.
type applier struct {
	*differ.Differ
	sn *snapshotter.Snapshotter
}

func (a applier) Apply(ctx context.Context, desc ocispec.Descriptor, mounts []mount.Mount, opts ...diff.ApplyOpt) (ocispec.Descriptor, error) {
	if l, err := layermount.Decode(mounts); err == nil {
		defer a.sn.Applying(l.Path)()
	}
	return a.Differ.Apply(ctx, desc, mounts, opts...)
}

// forwardNamespace makes the namespace containerd sent with a request the
// namespace of the calls the differ makes back to containerd's content
// store: a gRPC header arriving is not a header leaving.
func forwardNamespace(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(withNamespace(ctx), req)
}

func forwardNamespaceStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &namespacedStream{ServerStream: ss, ctx: withNamespace(ss.Context())})
}

func withNamespace(ctx context.Context) context.Context {
	if ns, ok := namespaces.Namespace(ctx); ok {
		return namespaces.WithNamespace(ctx, ns)
	}
	return ctx
}

type namespacedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *namespacedStream) Context() context.Context { return s.ctx }
