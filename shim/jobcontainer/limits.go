package jobcontainer

import (
	"fmt"

	"github.com/winproc/winproc/shim/compute"
)

// jobLimits are compute.Resources as a job object takes them, as runhcs
// sets them on a HostProcess container's job (hcsshim
// internal/jobcontainers specToLimits, internal/jobobject limits.go).
type jobLimits struct {
	// memory is the job's commit limit in bytes (JobMemoryLimit); 0 for
	// none.
	memory uint64
	// cpuFlags and cpuValue are JOBOBJECT_CPU_RATE_CONTROL_INFORMATION;
	// no flags for no CPU limit.
	cpuFlags, cpuValue uint32
	affinity           []groupAffinity
}

// limitsOf converts r. A job object has no processor count: a count
// becomes the share of all the host's processors it is (runhcs's
// calculateJobCPURate), a maximum is that share directly (both in
// hundredths of a percent, a hard cap), and a weight of 1..10000 becomes
// the job's 1..9 (runhcs's calculateJobCPUWeight).
func limitsOf(r compute.Resources, hostCPUs int) jobLimits {
	l := jobLimits{memory: r.MemoryLimitBytes}
	switch {
	case r.CPUCount != 0 && hostCPUs > 0:
		rate := uint32(uint64(r.CPUCount) * 10000 / uint64(hostCPUs))
		l.cpuFlags, l.cpuValue = cpuRateEnable|cpuRateHardCap, min(max(rate, 1), 10000)
	case r.CPUMaximum != 0:
		l.cpuFlags, l.cpuValue = cpuRateEnable|cpuRateHardCap, uint32(min(r.CPUMaximum, 10000))
	case r.CPUWeight != 0:
		l.cpuFlags, l.cpuValue = cpuRateEnable|cpuRateWeightBased, 1+8*uint32(min(r.CPUWeight, 10000))/10000
	}
	for _, a := range r.CPUAffinity {
		l.affinity = append(l.affinity, groupAffinity{Mask: a.Mask, Group: a.Group})
	}
	return l
}

// applyLimits sets l on the job: the extended limits always (the job is
// killed when its last handle closes, so that a shim that dies takes its
// containers with it, as HCS's ShouldTerminateOnLastHandleClosed does for
// a silo), the memory limit with them, then the CPU rate and affinity when
// set. A host whose job objects lack an information class (Wine has
// neither CPU rate control nor group affinity) answers
// ERROR_INVALID_PARAMETER: that limit is compute.ErrNotSupported, naming
// it.
func (b *Backend) applyLimits(job handle, l jobLimits, onlyChanges bool) error {
	if !onlyChanges || l.memory != 0 {
		flags := uint32(limitKillOnClose)
		if l.memory != 0 {
			flags |= limitJobMemory
		}
		if err := b.host.setJobLimits(job, flags, l.memory); err != nil {
			return b.limitFailed(fmt.Sprintf("set the job's limits (memory %d bytes)", l.memory), err)
		}
	}
	if l.cpuFlags != 0 {
		if err := b.host.setJobCPURate(job, l.cpuFlags, l.cpuValue); err != nil {
			return b.limitFailed(fmt.Sprintf("set the job's CPU rate (flags %#x, value %d)", l.cpuFlags, l.cpuValue), err)
		}
	}
	if len(l.affinity) > 0 {
		if err := b.host.setJobAffinity(job, l.affinity); err != nil {
			return b.limitFailed(fmt.Sprintf("pin the job to processors %v", l.affinity), err)
		}
	}
	return nil
}

func (b *Backend) limitFailed(what string, err error) error {
	f := b.host.facts(err)
	if f.InvalidParameter {
		return fmt.Errorf("%s: %w: this host's job objects do not take it (Windows Server 2019 and later do; Wine has no CPU rate control or group affinity for jobs): remove the limit from the container: %w", what, err, compute.ErrNotSupported)
	}
	return classify(what, err, f)
}
