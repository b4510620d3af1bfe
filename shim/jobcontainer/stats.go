package jobcontainer

import (
	"time"

	"github.com/winproc/winproc/shim/compute"
)

// fileTimeEpoch is a FILETIME's zero, 1601-01-01, in Unix seconds.
const fileTimeEpoch = -11644473600

// fromFileTime is a FILETIME (100 ns units since 1601) as a time.
func fromFileTime(t int64) time.Time {
	if t <= 0 {
		return time.Time{}
	}
	return time.Unix(fileTimeEpoch+t/1e7, (t%1e7)*100)
}

// jobMemoryUse is a job's committed memory now and at its peak, in bytes.
type jobMemoryUse struct{ commit, peak uint64 }

// statsOf is a compute.Stats from the job's accounting, its commit and
// the records of its processes, as runhcs reports a HostProcess
// container's (hcsshim internal/jobcontainers PropertiesV2): processor
// times from the job's accounting; memory as the job's commit now and at
// its peak, and its processes' private working sets; storage as
// the job's I/O counts (all of its processes' I/O, from the documented
// JobObjectBasicAndIoAccountingInformation; runhcs reads the disk's only,
// from JobObjectIoAttribution, which Microsoft does not document).
func statsOf(a accounting, io ioCounters, mem jobMemoryUse, procs []processRecord, started, now time.Time) *compute.Stats {
	s := &compute.Stats{
		Timestamp:          now,
		ContainerStartTime: started,
		Uptime:             now.Sub(started),
		CPU: compute.CPUStats{
			RuntimeUserNS:   a.TotalUserTime * 100,
			RuntimeKernelNS: a.TotalKernelTime * 100,
			TotalRuntimeNS:  (a.TotalUserTime + a.TotalKernelTime) * 100,
		},
		Memory: compute.MemoryStats{CommitBytes: mem.commit, CommitPeakBytes: mem.peak},
		Storage: compute.StorageStats{
			ReadCount:  io.ReadOperations,
			ReadBytes:  io.ReadBytes,
			WriteCount: io.WriteOperations,
			WriteBytes: io.WriteBytes,
		},
	}
	for _, p := range procs {
		s.Memory.PrivateWorkingSetBytes += p.PrivateSet
	}
	return s
}

// processInfos are the records of the processes pids, in the job's order;
// a process that exited between the two queries is left out.
func processInfos(records []processRecord, pids []uint32) []compute.ProcessInfo {
	byPID := make(map[uint32]processRecord, len(records))
	for _, r := range records {
		byPID[r.PID] = r
	}
	out := make([]compute.ProcessInfo, 0, len(pids))
	for _, pid := range pids {
		r, ok := byPID[pid]
		if !ok {
			continue
		}
		shared := uint64(0)
		if r.WorkingSet > r.PrivateSet {
			shared = r.WorkingSet - r.PrivateSet
		}
		out = append(out, compute.ProcessInfo{
			Pid:                          pid,
			ImageName:                    r.ImageName,
			CreateTimestamp:              fromFileTime(r.CreateTime),
			UserTime:                     time.Duration(r.UserTime) * 100,
			KernelTime:                   time.Duration(r.KernelTime) * 100,
			MemoryCommitBytes:            r.PrivateBytes,
			MemoryWorkingSetPrivateBytes: r.PrivateSet,
			MemoryWorkingSetSharedBytes:  shared,
		})
	}
	return out
}

// inJob are the records of the processes pids.
func inJob(records []processRecord, pids []uint32) []processRecord {
	want := make(map[uint32]bool, len(pids))
	for _, p := range pids {
		want[p] = true
	}
	var out []processRecord
	for _, r := range records {
		if want[r.PID] {
			out = append(out, r)
		}
	}
	return out
}
