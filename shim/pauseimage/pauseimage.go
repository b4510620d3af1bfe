// Package pauseimage prepares a pod's pause rootfs when the shim owns the
// pod (containerd's sandbox API, sandboxer = "shim"): it finds the pod's
// pause image in containerd, picks the manifest this host runs, refuses an
// image built for a Windows build the host cannot run, and prepares a
// writable snapshot of the image in the windowsfilter snapshotter, held by a
// lease of its own so containerd's garbage collector keeps it until the shim
// releases it. The snapshot's windows-layer mount is what the compute
// backend mounts as the pause container's C:.
//
// The package talks to containerd through its API clients over a
// grpc.ClientConnInterface, never through containerd's client package, whose
// start-up cost every shim would pay.
//
// # Leases
//
// containerd's snapshot service attaches a new snapshot to the lease named
// by the "containerd-lease" gRPC metadata of the request (leases.GRPCHeader),
// as it finds the namespace in "containerd-namespace". Prepare sets both on
// its outgoing context itself (namespaces.WithNamespace and leases.WithLease
// merge them into the context's outgoing gRPC metadata), since raw API
// clients have no interceptor doing it.
package pauseimage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/core/content"
	contentproxy "github.com/containerd/containerd/v2/core/content/proxy"
	"github.com/containerd/containerd/v2/core/leases"
	leasesproxy "github.com/containerd/containerd/v2/core/leases/proxy"
	"github.com/containerd/containerd/v2/core/mount"
	snapshotsproxy "github.com/containerd/containerd/v2/core/snapshots/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage/resolve"
)

// SandboxLabel is the label of a pause rootfs lease naming its sandbox, so
// `ctr leases ls` tells what a lease is for.
const SandboxLabel = "winproc.io/sandbox"

// Key returns the snapshot key and lease ID of sandboxID's pause rootfs.
func Key(sandboxID string) string { return "winproc-sandbox-" + sandboxID }

// Rootfs is a pod's prepared pause rootfs and what the image says the pause
// process runs.
type Rootfs struct {
	// Mounts is the single windows-layer mount of the pod's scratch (see
	// package layermount): Source the scratch, parentLayerPaths the image
	// layers.
	Mounts []mount.Mount
	// Snapshot is the snapshot key (and lease ID), Key(sandboxID).
	Snapshot string
	// Image is the pause image's reference, OSVersion the Windows build its
	// config declares ("" if none).
	Image     string
	OSVersion string
	// Args is what the pause process runs: the image config's Entrypoint
	// with its Cmd appended, as containerd builds process args from an
	// image.
	Args []string
	// ArgsEscaped is the Windows image config flag saying Args[0] is a whole
	// command line (a Dockerfile's shell-form ENTRYPOINT), to be used as the
	// process's command line as is.
	ArgsEscaped bool
	// Env, WorkingDir and User are the image config's.
	Env        []string
	WorkingDir string
	User       string
}

// Prepare makes sandboxID's pause rootfs from image in snapshotter (the
// windowsfilter snapshotter's name in containerd) for a host of build host.
// ctx must carry the containerd namespace (a ttrpc request's is enough).
//
// The returned release removes the snapshot and the lease; it is idempotent
// and needs no namespace on its context. On error Prepare leaves nothing
// behind. The errors a user can act on say what to do:
//
//   - the image is not in containerd: errdefs.ErrNotFound;
//   - the image is not unpacked for snapshotter, or is not a Windows
//     image, or lacks the program its entrypoint names:
//     errdefs.ErrFailedPrecondition;
//   - the image is built for a Windows build the host cannot run:
//     winbuild's *MismatchError (also ErrFailedPrecondition);
//   - sandboxID has a pause rootfs already: errdefs.ErrAlreadyExists.
func Prepare(ctx context.Context, conn grpc.ClientConnInterface, snapshotter, image, sandboxID string, host winbuild.Version) (*Rootfs, func(context.Context) error, error) {
	if image == "" || sandboxID == "" || snapshotter == "" {
		return nil, nil, fmt.Errorf("pause rootfs: image %q, sandbox %q and snapshotter %q are all required: %w", image, sandboxID, snapshotter, errdefs.ErrInvalidArgument)
	}
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("pause rootfs of sandbox %s: %w", sandboxID, err)
	}
	// A ttrpc request's namespace does not travel on outgoing gRPC calls
	// by itself.
	ctx = namespaces.WithNamespace(ctx, ns)

	target := func(ctx context.Context, name string) (ocispec.Descriptor, error) {
		return resolve.Target(ctx, conn, name)
	}
	img, err := lookup(ctx, target, contentproxy.NewContentStore(conn), ns, image, host)
	if err != nil {
		return nil, nil, err
	}
	sn := snapshotsproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), snapshotter)
	parent := img.chainID.String()
	if _, err := sn.Stat(ctx, parent); errdefs.IsNotFound(err) {
		return nil, nil, notUnpacked(image, ns, snapshotter, parent)
	} else if err != nil {
		return nil, nil, fmt.Errorf("pause image %q: look up its snapshot %s in snapshotter %s: %w", image, parent, snapshotter, err)
	}

	key := Key(sandboxID)
	lm := leasesproxy.NewLeaseManager(leasesapi.NewLeasesClient(conn))
	if _, err := lm.Create(ctx, leases.WithID(key), leases.WithLabel(SandboxLabel, sandboxID)); err != nil {
		if errdefs.IsAlreadyExists(err) {
			return nil, nil, fmt.Errorf("sandbox %s has a pause rootfs already (lease %s): %w", sandboxID, key, err)
		}
		return nil, nil, fmt.Errorf("pause rootfs of sandbox %s: create lease %s: %w", sandboxID, key, err)
	}
	release := func(ctx context.Context) error {
		return Release(namespaces.WithNamespace(ctx, ns), conn, snapshotter, sandboxID)
	}
	fail := func(err error) (*Rootfs, func(context.Context) error, error) {
		// Undo even if ctx is done, with its namespace.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := release(uctx); rerr != nil {
			log.G(ctx).WithError(rerr).WithField("sandbox", sandboxID).Warn("pause rootfs: undo after a failure")
		}
		return nil, nil, err
	}

	// The lease travels as the request's "containerd-lease" metadata:
	// containerd adds the new snapshot to it.
	mounts, err := sn.Prepare(leases.WithLease(ctx, key), key, parent)
	if err != nil {
		if errdefs.IsAlreadyExists(err) {
			return fail(fmt.Errorf("sandbox %s has a pause rootfs already (snapshot %s): %w", sandboxID, key, err))
		}
		return fail(fmt.Errorf("pause image %q: prepare snapshot %s of %s in snapshotter %s: %w", image, key, parent, snapshotter, err))
	}
	layer, err := layermount.Decode(mounts)
	if err != nil {
		return fail(fmt.Errorf("pause image %q: snapshotter %s: %w", image, snapshotter, err))
	}

	r := &Rootfs{
		Mounts:      mounts,
		Snapshot:    key,
		Image:       image,
		OSVersion:   img.OSVersion,
		Args:        append(append([]string(nil), img.Config.Config.Entrypoint...), img.Config.Config.Cmd...),
		ArgsEscaped: img.Config.Config.ArgsEscaped,
		Env:         img.Config.Config.Env,
		WorkingDir:  img.Config.Config.WorkingDir,
		User:        img.Config.Config.User,
	}
	if err := checkProgram(ctx, image, r.Args, r.ArgsEscaped, layer.Parents, len(img.Config.Config.Entrypoint) == 0); err != nil {
		return fail(err)
	}
	return r, release, nil
}

// Release removes sandboxID's pause rootfs: the snapshot and its lease. ctx
// must carry the namespace. What is gone already is not an error, so it can
// be called after a partial failure, twice, or by a restarted shim that only
// knows the sandbox ID. containerd's garbage collector removes the snapshot
// from the snapshotter afterwards.
func Release(ctx context.Context, conn grpc.ClientConnInterface, snapshotter, sandboxID string) error {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return fmt.Errorf("release pause rootfs of sandbox %s: %w", sandboxID, err)
	}
	ctx = namespaces.WithNamespace(ctx, ns)
	key := Key(sandboxID)
	var errs []error
	sn := snapshotsproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), snapshotter)
	if err := sn.Remove(ctx, key); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("remove snapshot %s: %w", key, err))
	}
	// Without its lease an unreferenced snapshot is garbage too: the lease
	// goes even if the removal failed.
	lm := leasesproxy.NewLeaseManager(leasesapi.NewLeasesClient(conn))
	if err := lm.Delete(ctx, leases.Lease{ID: key}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete lease %s: %w", key, err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release pause rootfs of sandbox %s: %w", sandboxID, err)
	}
	return nil
}

// pauseImage is the pause image as this host runs it.
type pauseImage struct {
	resolve.Image
	// chainID is the key of the image's top layer snapshot.
	chainID digest.Digest
}

// lookup finds image in containerd through target, reads its manifest for
// this host and its config from store, and checks that host can run it.
func lookup(ctx context.Context, target func(ctx context.Context, name string) (ocispec.Descriptor, error), store content.Provider, ns, image string, host winbuild.Version) (pauseImage, error) {
	desc, err := target(ctx, image)
	if errdefs.IsNotFound(err) {
		return pauseImage{}, imageNotFound(image, ns)
	}
	if err != nil {
		return pauseImage{}, fmt.Errorf("pause image %q: look it up: %w", image, err)
	}
	img, err := resolve.ForHost(ctx, store, desc, host)
	var blob *resolve.BlobError
	if errors.As(err, &blob) && errdefs.IsNotFound(blob.Err) {
		return pauseImage{}, notInContent(image, ns, blob)
	}
	if err != nil {
		return pauseImage{}, fmt.Errorf("pause image %q: %w", image, err)
	}
	config := img.Config
	if config.OS != "" && !strings.EqualFold(config.OS, "windows") {
		return pauseImage{}, fmt.Errorf("pause image %q is a %s/%s image; a Windows pod needs a Windows pause image (set pause_image in the runtime handler's options): %w",
			image, config.OS, config.Architecture, errdefs.ErrFailedPrecondition)
	}
	err = winbuild.Check(image, host, img.OSVersion)
	if errors.Is(err, winbuild.ErrUnknownBuild) {
		log.G(ctx).WithField("image", image).Warn(err.Error())
	} else if err != nil {
		return pauseImage{}, err
	}
	if len(config.RootFS.DiffIDs) == 0 {
		return pauseImage{}, fmt.Errorf("pause image %q has no layers: %w", image, errdefs.ErrFailedPrecondition)
	}
	return pauseImage{Image: img, chainID: identity.ChainID(config.RootFS.DiffIDs)}, nil
}

// The messages of the errors a user can act on.

func imageNotFound(image, ns string) error {
	return fmt.Errorf("pause image %q is not in containerd (namespace %s): pull it (crictl pull %s) or import it (ctr -n %s images import --platform windows/amd64 ARCHIVE), or set pause_image in the runtime handler's options to an image the node has: %w",
		image, ns, image, ns, errdefs.ErrNotFound)
}

func notInContent(image, ns string, blob *resolve.BlobError) error {
	return fmt.Errorf("pause image %q: its %s %s is not in containerd's content store (namespace %s): pull the image again for windows/amd64 (crictl pull %s): %w",
		image, blob.Blob, blob.Desc.Digest, ns, image, errdefs.ErrNotFound)
}

func notUnpacked(image, ns, snapshotter, chainID string) error {
	return fmt.Errorf("pause image %q is not unpacked for the %s snapshotter (it has no snapshot %s): pull it again on a node configured by winproc (crictl pull %s), or import it with ctr -n %s images import --platform windows/amd64 --snapshotter %s ARCHIVE: %w",
		image, snapshotter, chainID, image, ns, snapshotter, errdefs.ErrFailedPrecondition)
}
