package hcs

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// hcsStatisticsJSON is a Statistics property as HCS reports it, with every
// field distinct.
const hcsStatisticsJSON = `{
	"Timestamp": "2024-05-01T10:00:00Z",
	"ContainerStartTime": "2024-05-01T09:00:00Z",
	"Uptime100ns": 36000000000,
	"Memory": {
		"MemoryUsageCommitBytes": 1001,
		"MemoryUsageCommitPeakBytes": 1002,
		"MemoryUsagePrivateWorkingSetBytes": 1003
	},
	"Processor": {
		"TotalRuntime100ns": 11,
		"RuntimeUser100ns": 7,
		"RuntimeKernel100ns": 4
	},
	"Storage": {
		"ReadCountNormalized": 21,
		"ReadSizeBytes": 22,
		"WriteCountNormalized": 23,
		"WriteSizeBytes": 24
	},
	"Network": [{"BytesReceived": 5, "EndpointId": "e"}]
}`

func TestConvertStats(t *testing.T) {
	var s schema2.Statistics
	if err := json.Unmarshal([]byte(hcsStatisticsJSON), &s); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	got := convertStats(&s, now)
	want := &compute.Stats{
		Timestamp:          time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC),
		ContainerStartTime: time.Date(2024, 5, 1, 9, 0, 0, 0, time.UTC),
		Uptime:             time.Hour,
		CPU:                compute.CPUStats{TotalRuntimeNS: 1100, RuntimeUserNS: 700, RuntimeKernelNS: 400},
		Memory:             compute.MemoryStats{CommitBytes: 1001, CommitPeakBytes: 1002, PrivateWorkingSetBytes: 1003},
		Storage:            compute.StorageStats{ReadCount: 21, ReadBytes: 22, WriteCount: 23, WriteBytes: 24},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("convertStats:\n got %+v\nwant %+v", got, want)
	}

	for _, s := range []*schema2.Statistics{{}, nil} {
		if got := convertStats(s, now); !got.Timestamp.Equal(now) || got.CPU.TotalRuntimeNS != 0 {
			t.Errorf("a sample without a timestamp or sections is %+v, want stamped %v and zero", got, now)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		ticks uint64
		ns    uint64
		d     time.Duration
	}{
		{0, 0, 0},
		{1, 100, 100},
		{10_000_000, 1_000_000_000, time.Second},
		{math.MaxUint64 / 100, math.MaxUint64 / 100 * 100, math.MaxInt64},
		{math.MaxUint64/100 + 1, math.MaxUint64, math.MaxInt64},
		{math.MaxUint64, math.MaxUint64, math.MaxInt64},
		{math.MaxInt64 / 100, math.MaxInt64 / 100 * 100, time.Duration(math.MaxInt64 / 100 * 100)},
	} {
		if got := ticksToNS(tc.ticks); got != tc.ns {
			t.Errorf("ticksToNS(%d) = %d, want %d", tc.ticks, got, tc.ns)
		}
		if got := ticksToDuration(tc.ticks); got != tc.d {
			t.Errorf("ticksToDuration(%d) = %d, want %d", tc.ticks, got, tc.d)
		}
	}
}

func TestConvertProcessList(t *testing.T) {
	const list = `[
		{"CreateTimestamp": "2024-05-01T09:00:01Z", "ImageName": "cmd.exe", "KernelTime100ns": 30,
		 "MemoryCommitBytes": 31, "MemoryWorkingSetPrivateBytes": 32, "MemoryWorkingSetSharedBytes": 33,
		 "ProcessId": 4242, "UserTime100ns": 34},
		{"ImageName": "System", "MemoryCommitBytes": 5000000000}
	]`
	var items []schema2.ProcessDetails
	if err := json.Unmarshal([]byte(list), &items); err != nil {
		t.Fatal(err)
	}
	got := convertProcessList(items)
	want := []compute.ProcessInfo{
		{
			Pid:                          4242,
			ImageName:                    "cmd.exe",
			CreateTimestamp:              time.Date(2024, 5, 1, 9, 0, 1, 0, time.UTC),
			UserTime:                     3400 * time.Nanosecond,
			KernelTime:                   3000 * time.Nanosecond,
			MemoryCommitBytes:            31,
			MemoryWorkingSetPrivateBytes: 32,
			MemoryWorkingSetSharedBytes:  33,
		},
		// Counters past 32 bits (hcsshim's ProcessDetails has int32).
		{ImageName: "System", MemoryCommitBytes: 5000000000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("convertProcessList:\n got %+v\nwant %+v", got, want)
	}
	if got := convertProcessList(nil); got == nil || len(got) != 0 {
		t.Errorf("an empty list is %#v, want an empty slice", got)
	}
}
