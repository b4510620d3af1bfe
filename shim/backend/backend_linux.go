//go:build linux

package backend

import (
	"context"
	"os"
	"path/filepath"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/emulation"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// The emulated host claims Windows Server 2022, as the snapshotter does.
const defaultHostBuild = "10.0.20348"

// root is where the emulation keeps its systems: in containerd's state
// directory, next to the runtime's own, one directory per namespace (IDs are
// unique only within one). The shim runs in a task's bundle,
// <state>/io.containerd.runtime.v2.task/<namespace>/<id>, for serving and
// for `delete` alike, so both find the same root.
func root(ctx context.Context) (string, error) {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return "", err
	}
	bundle, err := os.Getwd()
	if err != nil {
		return "", err
	}
	state := filepath.Dir(filepath.Dir(filepath.Dir(bundle)))
	return filepath.Join(state, containerdnames.EmulationStateDir, ns), nil
}

// New opens the backend for the shim that serves tasks, with the
// handler's options.
func New(ctx context.Context, o options.Options) (compute.Backend, error) {
	r, err := root(ctx)
	if err != nil {
		return nil, err
	}
	return emulation.New(emulation.Config{Root: r, TemplatePrefix: o.WineTemplatePrefix})
}

// Open opens the backend for `delete`, which gets no runtime options:
// cleaning up needs no template prefix.
func Open(ctx context.Context) (compute.Backend, error) {
	r, err := root(ctx)
	if err != nil {
		return nil, err
	}
	return emulation.New(emulation.Config{Root: r})
}

// HostBuild is the Windows build the emulated host claims: the handler's
// host_build, else defaultHostBuild.
func HostBuild(o options.Options) (winbuild.Version, error) {
	if o.HostBuild == "" {
		return winbuild.Parse(defaultHostBuild)
	}
	return winbuild.Parse(o.HostBuild)
}
