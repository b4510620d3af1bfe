//go:build windows

package hcscontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// HcsGetComputeSystemProperties' Statistics (HCS JSON schema Statistics,
// MemoryStats) carry the container's memory: the stand-in's is its job
// object's processes', as hcsshim internal/jobcontainers PropertiesV2
// reads a job object's memory as its container's. A running process
// commits memory, and the peak is never below the commit.
func TestStatisticsMemory(t *testing.T) {
	h := load(t)
	sys := h.create(t, "statistics-memory", document(volume(t), false), true)
	exe, _ := os.Executable()
	p, _ := h.process(t, sys, fmt.Sprintf(`{"CommandArgs":[%q,"-test.run=^$"],"Environment":{%q:"1"}}`, exe, holdEnv))
	t.Cleanup(func() { h.run(t, func(op uintptr) error { return h.call("HcsTerminateProcess", p, op, 0) }) })
	doc, err := h.run(t, func(op uintptr) error {
		return h.call("HcsGetComputeSystemProperties", sys, op, uintptr(unsafe.Pointer(u16(`{"PropertyTypes":["Statistics"]}`))))
	})
	if err != nil {
		t.Fatalf("HcsGetComputeSystemProperties: %v", err)
	}
	var props struct {
		Statistics struct {
			Memory *struct {
				MemoryUsageCommitBytes            uint64
				MemoryUsageCommitPeakBytes        uint64
				MemoryUsagePrivateWorkingSetBytes uint64
			}
		}
	}
	if err := json.Unmarshal([]byte(doc), &props); err != nil {
		t.Fatalf("the properties %s: %v", doc, err)
	}
	m := props.Statistics.Memory
	if m == nil || m.MemoryUsageCommitBytes == 0 || m.MemoryUsagePrivateWorkingSetBytes == 0 || m.MemoryUsageCommitPeakBytes < m.MemoryUsageCommitBytes {
		t.Errorf("Statistics.Memory of a running process's container: %s", doc)
	}
}

// HcsModifyComputeSystem (reference page) takes a ModifySettingRequest on
// a system; the stand-in keeps each accepted request, in order, where the
// tests read what HCS was asked, and refuses one on a stopped system with
// HCS_E_SYSTEM_ALREADY_STOPPED (hcsshim internal/hcs/errors.go
// ErrVmcomputeAlreadyStopped).
func TestModifyKept(t *testing.T) {
	h := load(t)
	sys := h.create(t, "modify-kept", document(volume(t), false), true)
	reqs := []string{
		`{"ResourcePath":"Container/Memory/SizeInMB","RequestType":"Update","Settings":512}`,
		`{"ResourcePath":"Container/Processor/Limit","RequestType":"Update","Settings":5000}`,
	}
	modify := func(req string) error {
		_, err := h.run(t, func(op uintptr) error {
			return h.call("HcsModifyComputeSystem", sys, op, uintptr(unsafe.Pointer(u16(req))), 0)
		})
		return err
	}
	for i, req := range reqs {
		if err := modify(req); err != nil {
			t.Fatalf("HcsModifyComputeSystem %s: %v", req, err)
		}
		b, err := os.ReadFile(filepath.Join(StateDir, "documents", fmt.Sprintf("modify-kept-modify-%d.json", i+1)))
		if err != nil || string(b) != req {
			t.Errorf("request %d kept as %q, %v; want %s", i+1, b, err, req)
		}
	}
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", sys, op, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := modify(reqs[0]); !errors.Is(err, hcsSystemAlreadyStop) {
		t.Errorf("HcsModifyComputeSystem of a stopped system: %v, want HCS_E_SYSTEM_ALREADY_STOPPED", err)
	}
}
