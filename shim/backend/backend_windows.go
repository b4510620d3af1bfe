//go:build windows

package backend

import (
	"context"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// stateDir is where the HCS backend records each system's scratch layer, so
// that `delete` can release it after a shim died.
func stateDir() string {
	return containerdnames.ShimStateDirWindows
}

// New opens the backend for the shim that serves tasks, with the
// handler's options.
func New(context.Context, options.Options) (compute.Backend, error) {
	return hcs.New(hcs.Options{StateDir: stateDir()})
}

// Open opens the backend for `delete`.
func Open(context.Context) (compute.Backend, error) {
	return hcs.New(hcs.Options{StateDir: stateDir()})
}

// HostBuild is the host's Windows build.
func HostBuild(options.Options) (winbuild.Version, error) {
	return winbuild.Host()
}
