package hcs

import (
	"math"
	"time"

	"github.com/winproc/winproc/shim/compute"
)

// statistics is hcsshim.Statistics without the per-endpoint network
// statistics, which compute.Stats does not carry. Its JSON names are
// schema1's, as HCS reports them.
type statistics struct {
	Timestamp          time.Time      `json:",omitempty"`
	ContainerStartTime time.Time      `json:",omitempty"`
	Uptime100ns        uint64         `json:",omitempty"`
	Memory             memoryStats    `json:",omitempty"`
	Processor          processorStats `json:",omitempty"`
	Storage            storageStats   `json:",omitempty"`
}

// memoryStats is hcsshim.MemoryStats.
type memoryStats struct {
	UsageCommitBytes            uint64 `json:"MemoryUsageCommitBytes,omitempty"`
	UsageCommitPeakBytes        uint64 `json:"MemoryUsageCommitPeakBytes,omitempty"`
	UsagePrivateWorkingSetBytes uint64 `json:"MemoryUsagePrivateWorkingSetBytes,omitempty"`
}

// processorStats is hcsshim.ProcessorStats.
type processorStats struct {
	TotalRuntime100ns  uint64 `json:",omitempty"`
	RuntimeUser100ns   uint64 `json:",omitempty"`
	RuntimeKernel100ns uint64 `json:",omitempty"`
}

// storageStats is hcsshim.StorageStats.
type storageStats struct {
	ReadCountNormalized  uint64 `json:",omitempty"`
	ReadSizeBytes        uint64 `json:",omitempty"`
	WriteCountNormalized uint64 `json:",omitempty"`
	WriteSizeBytes       uint64 `json:",omitempty"`
}

// processListItem is hcsshim.ProcessListItem.
type processListItem struct {
	CreateTimestamp              time.Time `json:",omitempty"`
	ImageName                    string    `json:",omitempty"`
	KernelTime100ns              uint64    `json:",omitempty"`
	MemoryCommitBytes            uint64    `json:",omitempty"`
	MemoryWorkingSetPrivateBytes uint64    `json:",omitempty"`
	MemoryWorkingSetSharedBytes  uint64    `json:",omitempty"`
	ProcessId                    uint32    `json:",omitempty"`
	UserTime100ns                uint64    `json:",omitempty"`
}

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
// WindowsContainerStatistics. A sample without a timestamp is stamped now.
func convertStats(s statistics, now time.Time) *compute.Stats {
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
			CommitBytes:            s.Memory.UsageCommitBytes,
			CommitPeakBytes:        s.Memory.UsageCommitPeakBytes,
			PrivateWorkingSetBytes: s.Memory.UsagePrivateWorkingSetBytes,
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
func convertProcessList(items []processListItem) []compute.ProcessInfo {
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
