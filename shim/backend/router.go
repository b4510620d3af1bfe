package backend

import (
	"context"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// router is the backend of a shim whose silos and HostProcess containers
// are made by different backends (HCS and job objects on Windows): each
// system goes to the one its settings ask for, and a dead shim's delete
// opens the system in whichever has it.
type router struct {
	silos, hostProcess compute.Backend
}

var _ compute.Backend = router{}

func (r router) Create(ctx context.Context, id string, s *compute.Settings) (compute.System, error) {
	if s != nil && s.HostProcess != nil {
		return r.hostProcess.Create(ctx, id, s)
	}
	return r.silos.Create(ctx, id, s)
}

func (r router) Open(ctx context.Context, id string) (compute.System, error) {
	sys, err := r.silos.Open(ctx, id)
	if !errdefs.IsNotFound(err) {
		return sys, err
	}
	return r.hostProcess.Open(ctx, id)
}

// HostCPUs is the host's: both backends run on it.
func (r router) HostCPUs() int { return r.silos.HostCPUs() }
