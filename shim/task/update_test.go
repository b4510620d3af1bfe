package task

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/winproc/winproc/shim/compute"
)

// In-place resize at the seam: checked first, applied one kind of limit
// at a time, and nothing left half applied when a step is refused.
func TestUpdateResize(t *testing.T) {
	u16 := func(v uint16) *uint16 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	const used = 100 << 20
	cpuMax5000 := compute.Resources{CPUMaximum: 5000}
	cpuMax2500 := compute.Resources{CPUMaximum: 2500}
	pin1 := compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 1}}}
	allFour := compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 0xf}}}
	failOn := func(match func(compute.Resources) bool, err error) func(compute.Resources) error {
		return func(r compute.Resources) error {
			if match(r) {
				return err
			}
			return nil
		}
	}
	isAffinity := func(r compute.Resources) bool { return len(r.CPUAffinity) > 0 }
	isMemory := func(r compute.Resources) bool { return r.MemoryLimitBytes != 0 }
	isCPU := func(r compute.Resources) bool { return r.CPUMaximum != 0 || r.CPUCount != 0 || r.CPUWeight != 0 }
	for _, tc := range []struct {
		name      string
		update    specs.WindowsResources
		modifyErr func(compute.Resources) error
		code      codes.Code
		say       []string
		modified  []compute.Resources
	}{{
		name:     "CPU and memory apply, memory last",
		update:   specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000)}, Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)}},
		code:     codes.OK,
		modified: []compute.Resources{cpuMax5000, {MemoryLimitBytes: 512 << 20}},
	}, {
		name:     "a limit equal to the usage applies",
		update:   specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(used)}},
		code:     codes.OK,
		modified: []compute.Resources{{MemoryLimitBytes: used}},
	}, {
		name:   "memory below the usage refuses the whole update",
		update: specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000)}, Memory: &specs.WindowsMemoryResources{Limit: u64(64 << 20)}},
		code:   codes.FailedPrecondition,
		say:    []string{"memory_limit_in_bytes 67108864 (64.0 MiB)", "104857600 bytes (100.0 MiB committed)", "nothing was changed"},
	}, {
		name:      "CPU rate control the host lacks is FailedPrecondition, not Unimplemented",
		update:    specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: u64(2)}, Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)}},
		modifyErr: failOn(isCPU, fmt.Errorf("set the job's CPU rate: Invalid parameter: %w", compute.ErrNotSupported)),
		code:      codes.FailedPrecondition,
		say:       []string{"cpu_count (2) cannot change on this host", "Invalid parameter"},
	}, {
		name:      "affinity refused: the CPU limit is restored",
		update:    specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000), Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1}}}},
		modifyErr: failOn(isAffinity, fmt.Errorf("group affinity: %w", compute.ErrNotSupported)),
		code:      codes.FailedPrecondition,
		say:       []string{"affinity_cpus cannot change on this host"},
		modified:  []compute.Resources{cpuMax5000, cpuMax2500},
	}, {
		name:      "memory refused by the host: affinity and CPU restored, latest first",
		update:    specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000), Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1}}}, Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)}},
		modifyErr: failOn(isMemory, fmt.Errorf("HcsModifyComputeSystem: the parameter is incorrect: %w", errdefs.ErrInvalidArgument)),
		code:      codes.FailedPrecondition,
		say:       []string{"memory_limit_in_bytes (536870912) cannot change on this host"},
		modified:  []compute.Resources{cpuMax5000, pin1, allFour, cpuMax2500},
	}, {
		name:   "a restore that fails is named",
		update: specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(5000)}, Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)}},
		modifyErr: func(r compute.Resources) error {
			if isMemory(r) || r.CPUMaximum == 2500 {
				return errors.New("HcsModifyComputeSystem failed")
			}
			return nil
		},
		code:     codes.Unknown,
		say:      []string{"memory_limit_in_bytes (536870912): HcsModifyComputeSystem failed", "keeps the new cpu_maximum (5000)"},
		modified: []compute.Resources{cpuMax5000},
	}, {
		name:      "a container gone stays NotFound",
		update:    specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: u64(512 << 20)}},
		modifyErr: failOn(isMemory, fmt.Errorf("compute system c1: %w", errdefs.ErrNotFound)),
		code:      codes.NotFound,
	}, {
		name:   "storage cannot change live",
		update: specs.WindowsResources{Storage: &specs.WindowsStorageResources{Iops: u64(100)}, CPU: &specs.WindowsCPUResources{Maximum: u16(5000)}},
		modifyErr: failOn(func(r compute.Resources) bool { return r.StorageIOPSMaximum != 0 },
			fmt.Errorf("storage limits of a running container: %w", compute.ErrNotSupported)),
		code: codes.FailedPrecondition,
		say:  []string{"the storage limits"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			_, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "c1", Bundle: bundle(t, func(s *specs.Spec) {
				s.Windows.Resources = &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Maximum: u16(2500)}, Memory: &specs.WindowsMemoryResources{Limit: u64(256 << 20)}}
			})})
			if err != nil {
				t.Fatal(err)
			}
			h.start(t, "c1", "")
			sys := h.backend.System("c1")
			sys.Memory = &compute.MemoryStats{CommitBytes: used, PrivateWorkingSetBytes: used / 2}
			sys.ModifyErr = tc.modifyErr
			_, err = h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: windowsResources(t, &tc.update)})
			if got := status.Code(err); got != tc.code {
				t.Errorf("update: code %v, want %v: %v", got, tc.code, err)
			}
			for _, s := range tc.say {
				if err == nil || !strings.Contains(err.Error(), s) {
					t.Errorf("update: %v; want it to say %q", err, s)
				}
			}
			if !reflect.DeepEqual(sys.Modified, tc.modified) {
				t.Errorf("applied %+v, want %+v", sys.Modified, tc.modified)
			}
			sys.Proc(0).Exit(0)
			h.wait(t, "c1", "")
		})
	}
}

// A failed update restores the limits of the last update that succeeded,
// not those the container was created with.
func TestUpdateRestoresLastApplied(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	sys := h.backend.System("c1")
	count := uint64(2)
	if _, err := h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: windowsResources(t, &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: &count}})}); err != nil {
		t.Fatal(err)
	}
	sys.ModifyErr = func(r compute.Resources) error {
		if r.MemoryLimitBytes != 0 {
			return fmt.Errorf("refused: %w", errdefs.ErrInvalidArgument)
		}
		return nil
	}
	shares, limit := uint16(300), uint64(512<<20)
	_, err := h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: windowsResources(t, &specs.WindowsResources{
		CPU: &specs.WindowsCPUResources{Shares: &shares}, Memory: &specs.WindowsMemoryResources{Limit: &limit}})})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("update: %v", err)
	}
	want := []compute.Resources{{CPUCount: 2}, {CPUWeight: 300}, {CPUCount: 2}}
	if !reflect.DeepEqual(sys.Modified, want) {
		t.Errorf("applied %+v, want %+v", sys.Modified, want)
	}
	sys.Proc(0).Exit(0)
	h.wait(t, "c1", "")
}
