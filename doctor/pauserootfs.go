package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	sandboxapi "github.com/containerd/containerd/api/services/sandbox/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs/pkg/errgrpc"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/pauseimage"
)

// stalePauseRootfs lists the pause rootfs snapshots of sandboxes
// containerd no longer has, as orphans: the shim releases one in its
// delete, which containerd runs for a dead shim when it starts, before
// it serves the API that release needs (after a reboot, every sandbox
// shim's), so nothing else would ever remove it.
func (d *run) stalePauseRootfs(ctx context.Context) ([]Orphan, error) {
	if !d.cdUp {
		return nil, nil
	}
	ctx, cancel := d.ctx(ctx)
	defer cancel()
	all, err := d.cd.PauseRootfs(ctx, containerdnames.Snapshotter)
	if err != nil {
		return nil, fmt.Errorf("list the pause rootfs snapshots: %w", err)
	}
	var out []Orphan
	for _, r := range all {
		if r.SandboxKnown {
			continue
		}
		out = append(out, Orphan{
			Namespace: r.Namespace, ID: r.Sandbox,
			Why:         "containerd has no sandbox " + r.Sandbox,
			Held:        []string{"pause rootfs snapshot " + pauseimage.Key(r.Sandbox)},
			pauseRootfs: true,
		})
	}
	return out, nil
}

func (c *grpcContainerd) PauseRootfs(ctx context.Context, snapshotter string) ([]PauseRootfs, error) {
	nss, err := c.namespaces(ctx)
	if err != nil {
		return nil, err
	}
	prefix := pauseimage.Key("")
	var out []PauseRootfs
	for _, ns := range nss {
		nctx := namespaces.WithNamespace(ctx, ns)
		keys, err := c.snapshotKeys(nctx, snapshotter, prefix)
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			continue
		}
		resp, err := sandboxapi.NewStoreClient(c.conn).List(nctx, &sandboxapi.StoreListRequest{})
		if err != nil {
			return nil, errgrpc.ToNative(err)
		}
		known := map[string]bool{}
		for _, sb := range resp.GetList() {
			known[sb.GetSandboxID()] = true
		}
		for _, k := range keys {
			id := strings.TrimPrefix(k, prefix)
			out = append(out, PauseRootfs{Namespace: ns, Sandbox: id, SandboxKnown: known[id]})
		}
	}
	return out, nil
}

// snapshotKeys are the keys of snapshotter's snapshots in ctx's
// namespace that start with prefix.
func (c *grpcContainerd) snapshotKeys(ctx context.Context, snapshotter, prefix string) ([]string, error) {
	stream, err := snapshotsapi.NewSnapshotsClient(c.conn).List(ctx, &snapshotsapi.ListSnapshotsRequest{Snapshotter: snapshotter})
	if err != nil {
		return nil, errgrpc.ToNative(err)
	}
	var keys []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return keys, nil
		}
		if err != nil {
			return nil, errgrpc.ToNative(err)
		}
		for _, info := range resp.GetInfo() {
			if strings.HasPrefix(info.GetName(), prefix) {
				keys = append(keys, info.GetName())
			}
		}
	}
}

func (c *grpcContainerd) ReleasePauseRootfs(ctx context.Context, snapshotter string, r PauseRootfs) error {
	return pauseimage.Release(namespaces.WithNamespace(ctx, r.Namespace), c.conn, snapshotter, r.Sandbox)
}
