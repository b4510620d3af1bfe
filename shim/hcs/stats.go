package hcs

import (
	"math"
	"time"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// ticksToNS converts HCS's 100 ns units to nanoseconds, saturating rather
// than wrapping (the multiplication overflows after some 58,000 years).
func ticksToNS(ticks uint64) uint64 {
	if ticks > math.MaxUint64/100 {
		return math.MaxUint64
	}
	return ticks * 100
}

// ticksToDuration is ticksToNS as a Duration, saturating at its maximum.
func ticksToDuration(ticks uint64) time.Duration {
	ns := ticksToNS(ticks)
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// convertStats is what runhcs reports to containerd as
// WindowsContainerStatistics. A sample without a timestamp is stamped now;
// a missing section is zero.
func convertStats(st *schema2.Statistics, now time.Time) *compute.Stats {
	s := schema2.Statistics{Processor: &schema2.ProcessorStats{}, Memory: &schema2.MemoryStats{}, Storage: &schema2.StorageStats{}}
	if st != nil {
		s.Timestamp, s.ContainerStartTime, s.Uptime100ns = st.Timestamp, st.ContainerStartTime, st.Uptime100ns
		if st.Processor != nil {
			s.Processor = st.Processor
		}
		if st.Memory != nil {
			s.Memory = st.Memory
		}
		if st.Storage != nil {
			s.Storage = st.Storage
		}
	}
	out := &compute.Stats{
		Timestamp:          s.Timestamp,
		ContainerStartTime: s.ContainerStartTime,
		Uptime:             ticksToDuration(s.Uptime100ns),
		CPU: compute.CPUStats{
			TotalRuntimeNS:  ticksToNS(s.Processor.TotalRuntime100ns),
			RuntimeUserNS:   ticksToNS(s.Processor.RuntimeUser100ns),
			RuntimeKernelNS: ticksToNS(s.Processor.RuntimeKernel100ns),
		},
		Memory: compute.MemoryStats{
			CommitBytes:            s.Memory.MemoryUsageCommitBytes,
			CommitPeakBytes:        s.Memory.MemoryUsageCommitPeakBytes,
			PrivateWorkingSetBytes: s.Memory.MemoryUsagePrivateWorkingSetBytes,
		},
		Storage: compute.StorageStats{
			ReadCount:  s.Storage.ReadCountNormalized,
			ReadBytes:  s.Storage.ReadSizeBytes,
			WriteCount: s.Storage.WriteCountNormalized,
			WriteBytes: s.Storage.WriteSizeBytes,
		},
	}
	if out.Timestamp.IsZero() {
		out.Timestamp = now
	}
	return out
}

// convertProcessList is the system's process list for the task's Pids.
func convertProcessList(items []schema2.ProcessDetails) []compute.ProcessInfo {
	out := make([]compute.ProcessInfo, 0, len(items))
	for _, p := range items {
		out = append(out, compute.ProcessInfo{
			Pid:                          p.ProcessId,
			ImageName:                    p.ImageName,
			CreateTimestamp:              p.CreateTimestamp,
			UserTime:                     ticksToDuration(p.UserTime100ns),
			KernelTime:                   ticksToDuration(p.KernelTime100ns),
			MemoryCommitBytes:            p.MemoryCommitBytes,
			MemoryWorkingSetPrivateBytes: p.MemoryWorkingSetPrivateBytes,
			MemoryWorkingSetSharedBytes:  p.MemoryWorkingSetSharedBytes,
		})
	}
	return out
}
