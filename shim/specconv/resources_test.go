// FromSpec's and ResourcesFromSpec's CPU, memory and storage limits.

package specconv

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
)

func TestCPU(t *testing.T) {
	tests := []struct {
		name  string
		cpu   *specs.WindowsCPUResources
		hosts int
		want  compute.Resources
	}{
		{name: "none", cpu: nil, hosts: 2, want: compute.Resources{}},
		{name: "count capped", cpu: &specs.WindowsCPUResources{Count: ptr[uint64](64)}, hosts: 2,
			want: compute.Resources{CPUCount: 2, CPUCountCapped: true, RequestedCPUCount: 64}},
		{name: "count below host", cpu: &specs.WindowsCPUResources{Count: ptr[uint64](2)}, hosts: 4, want: compute.Resources{CPUCount: 2}},
		{name: "count equal to host", cpu: &specs.WindowsCPUResources{Count: ptr[uint64](4)}, hosts: 4, want: compute.Resources{CPUCount: 4}},
		{name: "maximum", cpu: &specs.WindowsCPUResources{Maximum: ptr[uint16](2500)}, hosts: 4, want: compute.Resources{CPUMaximum: 2500}},
		{name: "maximum at limit", cpu: &specs.WindowsCPUResources{Maximum: ptr[uint16](10000)}, hosts: 4, want: compute.Resources{CPUMaximum: 10000}},
		{name: "shares", cpu: &specs.WindowsCPUResources{Shares: ptr[uint16](2)}, hosts: 4, want: compute.Resources{CPUWeight: 2}},
		{name: "zeros are unset", cpu: &specs.WindowsCPUResources{Count: ptr[uint64](0), Maximum: ptr[uint16](0), Shares: ptr[uint16](500)},
			hosts: 4, want: compute.Resources{CPUWeight: 500}},
		{name: "affinity with a limit", cpu: &specs.WindowsCPUResources{Maximum: ptr[uint16](100),
			Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 0x3}, {Mask: 0xf0, Group: 1}}}, hosts: 4,
			want: compute.Resources{CPUMaximum: 100, CPUAffinity: []compute.CPUGroupAffinity{{Mask: 0x3}, {Mask: 0xf0, Group: 1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Windows.Resources.CPU = tc.cpu
			s, _, err := FromSpec(spec, baseRootfs(), tc.hosts)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(s.Resources, tc.want) {
				t.Errorf("resources %#v, want %#v", s.Resources, tc.want)
			}
		})
	}
}

func TestMemoryAndStorage(t *testing.T) {
	spec := baseSpec()
	spec.Windows.Resources = &specs.WindowsResources{
		Memory:  &specs.WindowsMemoryResources{Limit: ptr[uint64](512<<20 + 1)},
		Storage: &specs.WindowsStorageResources{Iops: ptr[uint64](300), Bps: ptr[uint64](1 << 20), SandboxSize: ptr[uint64](40 << 30)},
	}
	s, _, err := FromSpec(spec, baseRootfs(), hostCPUs)
	if err != nil {
		t.Fatal(err)
	}
	want := compute.Resources{MemoryLimitBytes: 512<<20 + 1, StorageIOPSMaximum: 300, StorageBandwidthMaximum: 1 << 20}
	if !reflect.DeepEqual(s.Resources, want) {
		t.Errorf("resources %#v, want %#v", s.Resources, want)
	}
	if s.SandboxSizeBytes != 40<<30 {
		t.Errorf("SandboxSizeBytes = %d", s.SandboxSizeBytes)
	}
	if got := s.Resources.MemoryLimitMB(); got != 513 {
		t.Errorf("MemoryLimitMB = %d, want 513", got)
	}
}

func TestResourcesFromSpec(t *testing.T) {
	r, err := ResourcesFromSpec(&specs.WindowsResources{
		CPU:    &specs.WindowsCPUResources{Count: ptr[uint64](16)},
		Memory: &specs.WindowsMemoryResources{Limit: ptr[uint64](1 << 30)},
	}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := (compute.Resources{CPUCount: 8, CPUCountCapped: true, RequestedCPUCount: 16, MemoryLimitBytes: 1 << 30}); !reflect.DeepEqual(r, want) {
		t.Errorf("%#v, want %#v", r, want)
	}
	if r, err := ResourcesFromSpec(nil, 8); err != nil || !reflect.DeepEqual(r, compute.Resources{}) {
		t.Errorf("nil resources: %#v, %v", r, err)
	}
	for name, bad := range map[string]*specs.WindowsResources{
		"resources.storage.sandboxSize":  {Storage: &specs.WindowsStorageResources{SandboxSize: ptr[uint64](1)}},
		"resources.cpu sets":             {CPU: &specs.WindowsCPUResources{Count: ptr[uint64](1), Maximum: ptr[uint16](1)}},
		"resources.cpu.maximum is 20000": {CPU: &specs.WindowsCPUResources{Maximum: ptr[uint16](20000)}},
	} {
		_, err := ResourcesFromSpec(bad, 8)
		if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error %v", name, err)
		}
	}
}
