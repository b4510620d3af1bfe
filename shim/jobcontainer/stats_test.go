package jobcontainer

import (
	"testing"
	"time"
)

func TestFromFileTime(t *testing.T) {
	// 2020-01-01T00:00:00Z is 132223104000000000 in 100 ns since 1601.
	if got := fromFileTime(132223104000000000); !got.Equal(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("fromFileTime = %v", got)
	}
	if got := fromFileTime(132223104000000001); got.Nanosecond() != 100 {
		t.Errorf("fromFileTime keeps %d ns", got.Nanosecond())
	}
	if !fromFileTime(0).IsZero() {
		t.Error("zero is not the zero time")
	}
}

func TestStatsOf(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(time.Minute)
	s := statsOf(accounting{TotalUserTime: 7, TotalKernelTime: 3}, ioCounters{ReadOperations: 1, ReadBytes: 2, WriteOperations: 3, WriteBytes: 4}, jobMemoryUse{commit: 300, peak: 900},
		[]processRecord{{PrivateBytes: 100, PrivateSet: 10}, {PrivateBytes: 200, PrivateSet: 20}}, start, now)
	if s.Timestamp != now || s.ContainerStartTime != start || s.Uptime != time.Minute ||
		s.CPU.TotalRuntimeNS != 1000 || s.CPU.RuntimeUserNS != 700 || s.CPU.RuntimeKernelNS != 300 ||
		s.Memory.CommitBytes != 300 || s.Memory.CommitPeakBytes != 900 || s.Memory.PrivateWorkingSetBytes != 30 ||
		s.Storage.ReadCount != 1 || s.Storage.ReadBytes != 2 || s.Storage.WriteCount != 3 || s.Storage.WriteBytes != 4 {
		t.Errorf("statsOf = %+v", s)
	}
}

func TestProcessInfos(t *testing.T) {
	records := []processRecord{
		{PID: 4, ImageName: "System"},
		{PID: 8, ImageName: "a.exe", UserTime: 20, KernelTime: 10, PrivateBytes: 5, WorkingSet: 9, PrivateSet: 6},
		{PID: 12, ImageName: "b.exe", WorkingSet: 1, PrivateSet: 2},
	}
	got := processInfos(records, []uint32{12, 8, 16})
	if len(got) != 2 || got[0].Pid != 12 || got[1].Pid != 8 {
		t.Fatalf("processInfos = %+v", got)
	}
	a := got[1]
	if a.ImageName != "a.exe" || a.UserTime != 2*time.Microsecond || a.KernelTime != time.Microsecond ||
		a.MemoryCommitBytes != 5 || a.MemoryWorkingSetPrivateBytes != 6 || a.MemoryWorkingSetSharedBytes != 3 {
		t.Errorf("a.exe = %+v", a)
	}
	if got[0].MemoryWorkingSetSharedBytes != 0 {
		t.Errorf("shared bytes below zero: %+v", got[0])
	}
	if in := inJob(records, []uint32{8}); len(in) != 1 || in[0].PID != 8 {
		t.Errorf("inJob = %+v", in)
	}
}
