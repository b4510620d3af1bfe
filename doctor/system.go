package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/content"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/protobuf/proto"

	"github.com/winproc/winproc/winbuild"
)

// System is the node as the checks reach it.
type System interface {
	// GOOS is the node's operating system ("windows", or "linux" for the
	// emulation): it decides binary names, default paths and the fixes.
	GOOS() string
	Getenv(key string) string
	ReadFile(path string) ([]byte, error)
	Glob(pattern string) ([]string, error)
	// LookPath finds an executable on PATH.
	LookPath(file string) (string, error)
	// IsFile reports whether path is a regular file.
	IsFile(path string) bool
	// ShimInfo runs `path -info` as containerd does (no options on stdin)
	// and returns its standard output.
	ShimInfo(ctx context.Context, path string) ([]byte, error)
	// Dial connects to a unix socket, or a named pipe on Windows, and
	// hangs up.
	Dial(ctx context.Context, address string) error
	// HostBuild is the host's own Windows build; an error off Windows.
	HostBuild() (winbuild.Version, error)
	// DirAccess says who besides the administrators can use the
	// directory path (fs.ErrNotExist when there is none).
	DirAccess(path string) (DirAccess, error)
	// Containerd returns a connection to containerd at address; it may
	// connect lazily, so an unreachable containerd shows in the calls.
	Containerd(address string) (Containerd, error)
	// Leftovers finds and removes the compute systems crashed shims
	// left; nil where winproc cannot list them, and the orphans check
	// does not run.
	Leftovers() Leftovers
	// Services reads the service manager and the registry; nil off
	// Windows, and the node shutdown check says it did not run.
	Services() Services
}

// Containerd is what the checks ask containerd. Errors are containerd's
// errdefs classes (errdefs.IsNotFound, ...), as its clients return them.
type Containerd interface {
	// Version returns containerd's version and revision.
	Version(ctx context.Context) (version, revision string, err error)
	// Plugins lists the plugins matching a containerd filter, e.g.
	// type=="io.containerd.snapshotter.v1",id=="windowsfilter".
	Plugins(ctx context.Context, filter string) ([]Plugin, error)
	// RuntimeInfo has containerd resolve and run the shim of runtime (a
	// runtime type or a binary path) with -info.
	RuntimeInfo(ctx context.Context, runtime string) (ShimInfo, error)
	// RuntimeHandlers lists the runtime handlers containerd's CRI serves;
	// empty if it does not say (before containerd 2.0).
	RuntimeHandlers(ctx context.Context) ([]string, error)
	// ImageTarget returns the target of the image record name.
	ImageTarget(ctx context.Context, namespace, name string) (ocispec.Descriptor, error)
	// Content is the content store as namespace sees it.
	Content(namespace string) content.Provider
	// StatSnapshot reports whether snapshotter has the snapshot key.
	StatSnapshot(ctx context.Context, namespace, snapshotter, key string) error
	// Tasks lists the IDs of the tasks containerd has in namespace, or
	// in every namespace for "".
	Tasks(ctx context.Context, namespace string) ([]string, error)
	// PauseRootfs lists, in every namespace, the pause rootfs snapshots
	// of snapshotter that winproc's shim made for its sandboxes
	// (pauseimage.Key), each with whether containerd still has the
	// sandbox.
	PauseRootfs(ctx context.Context, snapshotter string) ([]PauseRootfs, error)
	// ReleasePauseRootfs removes one, its snapshot and its lease
	// (pauseimage.Release).
	ReleasePauseRootfs(ctx context.Context, snapshotter string, r PauseRootfs) error
	Close() error
}

// PauseRootfs is the pause rootfs of a sandbox winproc's shim served.
type PauseRootfs struct {
	Namespace, Sandbox string
	// SandboxKnown is whether containerd has the sandbox.
	SandboxKnown bool
}

// Plugin is a plugin as containerd's introspection service reports it.
type Plugin struct {
	Type, ID  string
	Platforms []string
	// InitErr is the error that kept the plugin from loading, "" if it
	// loaded.
	InitErr string
}

// ShimInfo is what a shim's -info says.
type ShimInfo struct {
	Name, Version, Revision string
}

// decodeShimInfo decodes a shim's -info output, a RuntimeInfo protobuf.
func decodeShimInfo(b []byte) (ShimInfo, error) {
	var info apitypes.RuntimeInfo
	if err := proto.Unmarshal(b, &info); err != nil {
		return ShimInfo{}, fmt.Errorf("its -info output is not a RuntimeInfo protobuf: %w", err)
	}
	return shimInfoOf(&info), nil
}

func shimInfoOf(info *apitypes.RuntimeInfo) ShimInfo {
	return ShimInfo{Name: info.GetName(), Version: info.GetVersion().GetVersion(), Revision: info.GetVersion().GetRevision()}
}

// Local returns the machine the doctor runs on.
func Local() System { return local{} }

type local struct{}

func (local) GOOS() string                         { return runtime.GOOS }
func (local) Getenv(key string) string             { return os.Getenv(key) }
func (local) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }
func (local) Glob(pattern string) ([]string, error) {
	return filepath.Glob(pattern)
}
func (local) LookPath(file string) (string, error) { return exec.LookPath(file) }

func (local) IsFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func (local) ShimInfo(ctx context.Context, path string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "-info")
	cmd.Stdin = bytes.NewReader(nil)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		if msg != "" {
			return nil, fmt.Errorf("%w: %s", err, msg)
		}
		return nil, err
	}
	return stdout.Bytes(), nil
}

func (local) Dial(ctx context.Context, address string) error {
	c, err := dial(ctx, address)
	if err != nil {
		return err
	}
	return c.Close()
}

func (local) HostBuild() (winbuild.Version, error) { return winbuild.Host() }

func (local) Containerd(address string) (Containerd, error) { return dialContainerd(address) }

func (local) Leftovers() Leftovers { return localLeftovers() }

func (local) Services() Services { return localServices() }
