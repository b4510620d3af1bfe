package hcs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// Modify changes the limits of the running container as runhcs does
// (cmd/containerd-shim-runhcs-v1 task_hcs.go updateWCOWResources): the
// memory limit in MiB, rounded up to an even number, at
// Container/Memory/SizeInMB; a processor count, maximum or weight at
// Container/Processor; the affinity on the silo's job object. Storage
// limits cannot change.
func (s *system) Modify(ctx context.Context, r compute.Resources) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if r.StorageIOPSMaximum != 0 || r.StorageBandwidthMaximum != 0 {
		return notSupported("compute system %s: the storage limits of a running container cannot change; HCS sets them when the container is created", s.id)
	}
	for _, req := range modifyRequests(r) {
		if err := s.c.Modify(ctx, req); err != nil {
			return s.modifyFailed(string(req.ResourcePath), err)
		}
	}
	if len(r.CPUAffinity) > 0 {
		if err := s.c.SetAffinity(groupAffinities(r.CPUAffinity)); err != nil {
			return s.modifyFailed("the processor affinity (the silo's job object)", err)
		}
	}
	return nil
}

// modifyFailed classifies HCS's refusal of a limit: E_INVALIDARG (and
// ERROR_INVALID_PARAMETER, what a job object without group affinity
// answers) is HCS or the host refusing that limit for a running
// container, FailedPrecondition naming it; other failures are classified
// as any HCS call's.
func (s *system) modifyFailed(what string, err error) error {
	var n syscall.Errno
	if errors.As(err, &n) && (uint32(n) == eInvalidArg || n == errorInvalidParameter) {
		return fmt.Errorf("change %s of compute system %s: %w: this host does not take the limit for a running container: %w", what, s.id, err, errdefs.ErrFailedPrecondition)
	}
	return s.fail(fmt.Sprintf("change %s of", what), err)
}

// eInvalidArg is E_INVALIDARG; errorInvalidParameter ERROR_INVALID_PARAMETER.
const (
	eInvalidArg                         = 0x80070057
	errorInvalidParameter syscall.Errno = 87
)

// modifyRequests are the requests that change r's limits.
func modifyRequests(r compute.Resources) []*schema2.ModifySettingRequest {
	var reqs []*schema2.ModifySettingRequest
	if mb := r.MemoryLimitMB(); mb > 0 {
		reqs = append(reqs, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourceMemoryLimit,
			RequestType:  schema2.RequestUpdate,
			Settings:     (mb + 1) &^ 1, // HCS takes 2 MiB steps
		})
	}
	if r.CPUCount != 0 || r.CPUMaximum != 0 || r.CPUWeight != 0 {
		reqs = append(reqs, &schema2.ModifySettingRequest{
			ResourcePath: schema2.ResourceProcessorLimits,
			RequestType:  schema2.RequestUpdate,
			Settings:     schema2.Processor{Count: int32(r.CPUCount), Maximum: int32(r.CPUMaximum), Weight: int32(r.CPUWeight)},
		})
	}
	return reqs
}
