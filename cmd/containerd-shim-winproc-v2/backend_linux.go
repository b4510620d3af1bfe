//go:build linux

package main

import (
	"context"
	"path/filepath"

	"github.com/containerd/containerd/v2/pkg/namespaces"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/emulation"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// The emulated host claims Windows Server 2022, as the snapshotter does.
const defaultHostBuild = "10.0.20348"

// root keeps each namespace's systems apart: container IDs are unique only
// within a namespace.
func root(ctx context.Context) (string, error) {
	ns, err := namespaces.NamespaceRequired(ctx)
	if err != nil {
		return "", err
	}
	return filepath.Join(emulation.DefaultRoot, ns), nil
}

func newBackend(ctx context.Context, o options.Options) (compute.Backend, error) {
	r, err := root(ctx)
	if err != nil {
		return nil, err
	}
	return emulation.New(emulation.Config{Root: r, TemplatePrefix: o.WineTemplatePrefix})
}

// openBackend serves `delete`, which gets no runtime options: cleaning up
// needs no template prefix.
func openBackend(ctx context.Context) (compute.Backend, error) {
	r, err := root(ctx)
	if err != nil {
		return nil, err
	}
	return emulation.New(emulation.Config{Root: r})
}

func hostBuild(o options.Options) (winbuild.Version, error) {
	if o.HostBuild == "" {
		return winbuild.Parse(defaultHostBuild)
	}
	return winbuild.Parse(o.HostBuild)
}
