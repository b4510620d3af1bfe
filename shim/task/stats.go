package task

import (
	"time"

	runhcsopts "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/options"
	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/winproc/winproc/shim/compute"
)

// Statistics converts the seam's statistics to runhcs's proto, which
// containerd's CRI decodes on Windows.
func Statistics(st *compute.Stats) *wstats.Statistics {
	w := &wstats.WindowsContainerStatistics{
		UptimeNS: uint64(st.Uptime / time.Nanosecond),
		Processor: &wstats.WindowsContainerProcessorStatistics{
			TotalRuntimeNS:  st.CPU.TotalRuntimeNS,
			RuntimeUserNS:   st.CPU.RuntimeUserNS,
			RuntimeKernelNS: st.CPU.RuntimeKernelNS,
		},
		Memory: &wstats.WindowsContainerMemoryStatistics{
			MemoryUsageCommitBytes:            st.Memory.CommitBytes,
			MemoryUsageCommitPeakBytes:        st.Memory.CommitPeakBytes,
			MemoryUsagePrivateWorkingSetBytes: st.Memory.PrivateWorkingSetBytes,
		},
		Storage: &wstats.WindowsContainerStorageStatistics{
			ReadCountNormalized:  st.Storage.ReadCount,
			ReadSizeBytes:        st.Storage.ReadBytes,
			WriteCountNormalized: st.Storage.WriteCount,
			WriteSizeBytes:       st.Storage.WriteBytes,
		},
	}
	if !st.Timestamp.IsZero() {
		w.Timestamp = timestamppb.New(st.Timestamp)
	}
	if !st.ContainerStartTime.IsZero() {
		w.ContainerStartTime = timestamppb.New(st.ContainerStartTime)
	}
	return &wstats.Statistics{Container: &wstats.Statistics_Windows{Windows: w}}
}

// ProcessDetails converts a process of the seam's process list to runhcs's
// proto for Pids (runhcs's hcsTask.Pids); execID names the task's own
// process it is, if any: the task's ID for its init process.
func ProcessDetails(p compute.ProcessInfo, execID string) *runhcsopts.ProcessDetails {
	d := &runhcsopts.ProcessDetails{
		ImageName:                    p.ImageName,
		KernelTime_100Ns:             uint64(p.KernelTime / 100),
		UserTime_100Ns:               uint64(p.UserTime / 100),
		MemoryCommitBytes:            p.MemoryCommitBytes,
		MemoryWorkingSetPrivateBytes: p.MemoryWorkingSetPrivateBytes,
		MemoryWorkingSetSharedBytes:  p.MemoryWorkingSetSharedBytes,
		ProcessID:                    p.Pid,
		ExecID:                       execID,
	}
	if !p.CreateTimestamp.IsZero() {
		d.CreatedAt = timestamppb.New(p.CreateTimestamp)
	}
	return d
}
