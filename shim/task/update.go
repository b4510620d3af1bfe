package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/specconv"
)

const mib = 1 << 20

// restoreTimeout bounds the restore of the limits a refused update had
// applied.
const restoreTimeout = 30 * time.Second

// UpdateTask changes the limits of task id live (in-place resize): it
// validates the request, refuses a memory limit below the container's
// current usage, then applies the limits one kind at a time (storage, CPU,
// affinity, memory), restoring those already applied when a later one
// fails, so that a refused update changes nothing.
//
// What the host cannot change on a running container (a limit the
// backend does not support, or one the host refuses) is FailedPrecondition
// naming the field: containerd takes an Unimplemented answer to a task
// call for an older task API and retries it.
func (s *Service) UpdateTask(ctx context.Context, id string, res *specs.WindowsResources) error {
	c, err := s.container(id)
	if err != nil {
		return err
	}
	if res == nil {
		return fmt.Errorf("update of task %s carries no resources: %w", id, errdefs.ErrInvalidArgument)
	}
	r, err := specconv.ResourcesFromSpec(res, s.backend.HostCPUs())
	if err != nil {
		return fmt.Errorf("update of task %s: %w", id, err)
	}
	if r.CPUCountCapped {
		log.G(ctx).WithField("task", id).Warnf("CPU count %d is more than the host's %d processors; using %d",
			r.RequestedCPUCount, s.backend.HostCPUs(), r.CPUCount)
	}
	c.resizeMu.Lock()
	defer c.resizeMu.Unlock()
	if err := checkMemoryUsage(ctx, c, r); err != nil {
		return err
	}
	return c.applyLimits(ctx, r, s.backend.HostCPUs())
}

// checkMemoryUsage refuses a memory limit below what the container has
// committed now. A job object's limit (what HCS and a HostProcess
// container's job enforce, JOB_OBJECT_LIMIT_JOB_MEMORY) bounds the
// committed memory of its processes, so a limit below it fails the
// container's next allocation. Commit is at least the private working set
// the kubelet compares before a decrease (KEP-1287's best-effort check,
// kubernetes#133012; KEP-6303 for Windows), so this refuses whatever the
// kubelet's own check would, and closes the race kubernetes#135670 asks
// runtimes to close.
func checkMemoryUsage(ctx context.Context, c *container, r compute.Resources) error {
	if r.MemoryLimitBytes == 0 {
		return nil
	}
	st, err := c.system.Stats(ctx)
	if err != nil {
		return fmt.Errorf("update of task %s: read its memory usage before changing its memory limit: %w", c.id, err)
	}
	if used := st.Memory.CommitBytes; r.MemoryLimitBytes < used {
		return fmt.Errorf("update of task %s: memory_limit_in_bytes %d (%.1f MiB) is below the container's current usage of %d bytes (%.1f MiB committed): "+
			"its next allocation would fail; nothing was changed: lower the limit once the container uses less, or restart it with the new limit: %w",
			c.id, r.MemoryLimitBytes, float64(r.MemoryLimitBytes)/mib, used, float64(used)/mib, errdefs.ErrFailedPrecondition)
	}
	return nil
}

// limitStep is one kind of limit of an update: what it sets, and what
// restores the limits the task had.
type limitStep struct {
	field   string
	set     compute.Resources
	restore compute.Resources
}

// applyLimits applies r's steps in order; when one fails, those applied
// are restored, latest first.
func (c *container) applyLimits(ctx context.Context, r compute.Resources, hostCPUs int) error {
	steps := limitSteps(r, c.limits, hostCPUs)
	for i, st := range steps {
		if err := c.system.Modify(ctx, st.set); err != nil {
			err = refusedByHost(c.id, st.field, err)
			return errors.Join(err, c.restore(ctx, steps[:i]))
		}
	}
	c.limits = merged(c.limits, r)
	return nil
}

// restore undoes applied, latest first. A limit that cannot be restored is
// named in the error, so the caller knows what stayed.
func (c *container) restore(ctx context.Context, applied []limitStep) error {
	// The restore runs even when the update's caller gave up, within a
	// bound of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	var errs []error
	for i := len(applied) - 1; i >= 0; i-- {
		st := applied[i]
		if err := c.system.Modify(ctx, st.restore); err != nil {
			errs = append(errs, fmt.Errorf("task %s keeps the new %s: restoring the previous value failed: %w", c.id, st.field, err))
			continue
		}
		log.G(ctx).WithField("task", c.id).Debugf("restored %s after a failed update", st.field)
	}
	return errors.Join(errs...)
}

// refusedByHost classes a backend's refusal of a limit: a limit the host
// does not support, or one it refuses for a running container, is a
// FailedPrecondition naming the field.
func refusedByHost(id, field string, err error) error {
	if errdefs.IsNotImplemented(err) || errdefs.IsInvalidArgument(err) {
		return fmt.Errorf("update of task %s: %s cannot change on this host: %v; nothing was changed: %w", id, field, err, errdefs.ErrFailedPrecondition)
	}
	return fmt.Errorf("update of task %s: %s: %w", id, field, err)
}

// limitSteps splits r into its kinds of limit. The memory limit goes last:
// it was checked against the container's usage, and no Modify can restore
// "no memory limit" (a zero field is no change). Storage goes first:
// no backend changes it live, and its refusal then costs nothing.
func limitSteps(r, prev compute.Resources, hostCPUs int) []limitStep {
	var steps []limitStep
	if r.StorageIOPSMaximum != 0 || r.StorageBandwidthMaximum != 0 {
		steps = append(steps, limitStep{field: "the storage limits (storage.iops, storage.bps)",
			set: compute.Resources{StorageIOPSMaximum: r.StorageIOPSMaximum, StorageBandwidthMaximum: r.StorageBandwidthMaximum}})
	}
	if f := cpuField(r); f != "" {
		restore := compute.Resources{CPUCount: prev.CPUCount, CPUMaximum: prev.CPUMaximum, CPUWeight: prev.CPUWeight}
		if cpuField(prev) == "" {
			// No CPU limit: the whole host's cycles.
			restore.CPUMaximum = 10000
		}
		steps = append(steps, limitStep{field: f,
			set:     compute.Resources{CPUCount: r.CPUCount, CPUMaximum: r.CPUMaximum, CPUWeight: r.CPUWeight},
			restore: restore})
	}
	if len(r.CPUAffinity) > 0 {
		restore := prev.CPUAffinity
		if len(restore) == 0 {
			restore = allProcessors(hostCPUs)
		}
		steps = append(steps, limitStep{field: "affinity_cpus", set: compute.Resources{CPUAffinity: r.CPUAffinity},
			restore: compute.Resources{CPUAffinity: restore}})
	}
	if r.MemoryLimitBytes != 0 {
		steps = append(steps, limitStep{field: fmt.Sprintf("memory_limit_in_bytes (%d)", r.MemoryLimitBytes),
			set: compute.Resources{MemoryLimitBytes: r.MemoryLimitBytes}})
	}
	return steps
}

// cpuField names r's CPU limit as CRI's WindowsContainerResources does,
// "" for none.
func cpuField(r compute.Resources) string {
	switch {
	case r.CPUCount != 0:
		return fmt.Sprintf("cpu_count (%d)", r.CPUCount)
	case r.CPUMaximum != 0:
		return fmt.Sprintf("cpu_maximum (%d)", r.CPUMaximum)
	case r.CPUWeight != 0:
		return fmt.Sprintf("cpu_shares (%d)", r.CPUWeight)
	}
	return ""
}

// allProcessors is the affinity of every processor of the host, 64 to a
// processor group, as Windows numbers them.
func allProcessors(hostCPUs int) []compute.CPUGroupAffinity {
	var a []compute.CPUGroupAffinity
	for g := 0; hostCPUs > 0; g++ {
		n := min(hostCPUs, 64)
		mask := ^uint64(0)
		if n < 64 {
			mask = 1<<n - 1
		}
		a = append(a, compute.CPUGroupAffinity{Group: uint16(g), Mask: mask})
		hostCPUs -= n
	}
	return a
}

// merged is prev with r's changes: a zero field of r is no change, and a
// CPU limit replaces the previous one, whatever its kind.
func merged(prev, r compute.Resources) compute.Resources {
	if cpuField(r) != "" {
		prev.CPUCount, prev.CPUMaximum, prev.CPUWeight = r.CPUCount, r.CPUMaximum, r.CPUWeight
	}
	if len(r.CPUAffinity) > 0 {
		prev.CPUAffinity = r.CPUAffinity
	}
	if r.MemoryLimitBytes != 0 {
		prev.MemoryLimitBytes = r.MemoryLimitBytes
	}
	return prev
}
