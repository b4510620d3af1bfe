//go:build windows

package backend

import (
	"context"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs"
	"github.com/winproc/winproc/shim/jobcontainer"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// New opens the backend for the shim that serves tasks, with the
// handler's options.
func New(ctx context.Context, _ options.Options) (compute.Backend, error) {
	return Open(ctx)
}

// Open opens the backend for `delete`: silos are HCS's, HostProcess
// containers job objects (shim/jobcontainer). Each records what it made
// in a directory of its own, so that `delete` releases it after a shim
// died.
func Open(context.Context) (compute.Backend, error) {
	silos, err := hcs.New(hcs.Options{StateDir: containerdnames.ShimStateDirWindows})
	if err != nil {
		return nil, err
	}
	hostProcess, err := jobcontainer.New(jobcontainer.Options{StateDir: containerdnames.JobContainerStateDirWindows})
	if err != nil {
		return nil, err
	}
	return router{silos: silos, hostProcess: hostProcess}, nil
}

// HostBuild is the host's Windows build.
func HostBuild(options.Options) (winbuild.Version, error) {
	return winbuild.Host()
}
