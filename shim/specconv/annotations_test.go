package specconv

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/compute"
)

// What containerd forwards is what the shim honours: nothing forwarded is
// ignored, nothing honoured is dropped on the way.
func TestHonouredAnnotationsForwarded(t *testing.T) {
	if got := HonouredAnnotations(); !slices.Equal(got, containerdnames.Annotations) {
		t.Errorf("honoured %q\nforwarded %q", got, containerdnames.Annotations)
	}
}

// runhcs's resource annotations override the spec, field by field.
func TestResourceAnnotations(t *testing.T) {
	tests := []struct {
		name  string
		spec  *specs.WindowsResources
		annot map[string]string
		want  compute.Resources
	}{
		{"count over the spec's", &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: ptr(uint64(1))}},
			map[string]string{"io.microsoft.container.processor.count": "2"}, compute.Resources{CPUCount: 2}},
		{"limit", nil, map[string]string{"io.microsoft.container.processor.limit": "5000"}, compute.Resources{CPUMaximum: 5000}},
		{"weight", nil, map[string]string{"io.microsoft.container.processor.weight": " 300 "}, compute.Resources{CPUWeight: 300}},
		{"memory in MB", &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: ptr(uint64(1 << 30))}},
			map[string]string{"io.microsoft.container.memory.sizeinmb": "256"}, compute.Resources{MemoryLimitBytes: 256 << 20}},
		{"storage", &specs.WindowsResources{Storage: &specs.WindowsStorageResources{Iops: ptr(uint64(10))}},
			map[string]string{"io.microsoft.container.storage.qos.bandwidthmaximum": "1000000", "io.microsoft.container.storage.qos.iopsmaximum": "50"},
			compute.Resources{StorageIOPSMaximum: 50, StorageBandwidthMaximum: 1000000}},
		{"others untouched", &specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: ptr(uint64(1 << 30))}},
			map[string]string{"io.microsoft.container.processor.count": "2", "io.microsoft.virtualmachine.computetopology.memory.sizeinmb": "64"},
			compute.Resources{CPUCount: 2, MemoryLimitBytes: 1 << 30}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Windows.Resources = tc.spec
			spec.Annotations = tc.annot
			var before specs.WindowsResources
			if tc.spec != nil {
				before = *tc.spec
			}
			s, _, err := FromSpec(spec, baseRootfs(), hostCPUs)
			if err != nil {
				t.Fatal(err)
			}
			if s.Resources.CPUCount != tc.want.CPUCount || s.Resources.CPUMaximum != tc.want.CPUMaximum || s.Resources.CPUWeight != tc.want.CPUWeight ||
				s.Resources.MemoryLimitBytes != tc.want.MemoryLimitBytes || s.Resources.StorageIOPSMaximum != tc.want.StorageIOPSMaximum ||
				s.Resources.StorageBandwidthMaximum != tc.want.StorageBandwidthMaximum {
				t.Errorf("resources %+v, want %+v", s.Resources, tc.want)
			}
			if tc.spec != nil && (tc.spec.CPU != before.CPU || tc.spec.Memory != before.Memory || tc.spec.Storage != before.Storage) {
				t.Error("the spec's resources were changed")
			}
		})
	}
}

// An annotation winproc cannot honour or read is refused, named.
func TestAnnotationsRefused(t *testing.T) {
	const gmsa = `{"CmsPlugins":["ActiveDirectory"]}`
	tests := []struct {
		name  string
		annot map[string]string
		cred  any
		is    func(error) bool
		want  string
	}{
		{"dump type without location", map[string]string{"io.microsoft.wcow.processdumptype": "full"}, nil, errdefs.IsInvalidArgument,
			`annotation io.microsoft.wcow.processdumptype="full" without io.microsoft.container.processdumplocation`},
		{"dump count without location", map[string]string{"io.microsoft.wcow.processdumpcount": "3"}, nil, errdefs.IsInvalidArgument, "io.microsoft.wcow.processdumpcount"},
		{"dump type unknown", map[string]string{"io.microsoft.container.processdumplocation": `C:\dumps`, "io.microsoft.wcow.processdumptype": "heap"}, nil, errdefs.IsInvalidArgument,
			"the dump type is mini or full"},
		{"dump count zero", map[string]string{"io.microsoft.container.processdumplocation": `C:\dumps`, "io.microsoft.wcow.processdumpcount": "0"}, nil, errdefs.IsInvalidArgument,
			"the dump count is a whole number from 1"},
		{"device extensions", map[string]string{"io.microsoft.container.wcow.deviceextensions": `C:\ext.json`}, nil, errdefs.IsInvalidArgument,
			"io.microsoft.container.wcow.deviceextensions"},
		{"not a number", map[string]string{"io.microsoft.container.processor.count": "two"}, nil, errdefs.IsInvalidArgument,
			`annotation io.microsoft.container.processor.count="two" is not a whole number`},
		{"out of range", map[string]string{"io.microsoft.container.processor.limit": "20000"}, nil, errdefs.IsInvalidArgument,
			"spec.windows.resources (with its io.microsoft.container.* annotations).cpu.maximum is 20000"},
		{"two CPU settings", map[string]string{"io.microsoft.container.processor.count": "2", "io.microsoft.container.processor.weight": "2"}, nil, errdefs.IsInvalidArgument,
			"Windows applies only one of count, maximum and shares"},
		{"not a bool", map[string]string{"io.microsoft.container.wcow.gmsa.disable": "yes"}, nil, errdefs.IsInvalidArgument, "is not true or false"},
		{"gMSA disabled", map[string]string{"io.microsoft.container.wcow.gmsa.disable": "true"}, gmsa, errdefs.IsFailedPrecondition, "gMSA credentials are disabled"},
		{"unsafe operations disabled", map[string]string{"io.microsoft.disable-unsafe-operations": "true"}, gmsa, errdefs.IsFailedPrecondition, "gMSA credentials are disabled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := baseSpec()
			spec.Annotations = tc.annot
			spec.Windows.CredentialSpec = tc.cred
			_, _, err := FromSpec(spec, baseRootfs(), hostCPUs)
			if err == nil || !tc.is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant one with %q", err, tc.want)
			}
		})
	}
}

// The process dump annotations become the container's LocalDumps settings,
// with runhcs's defaults (full dumps, 10 of them).
func TestProcessDumpAnnotations(t *testing.T) {
	for _, tc := range []struct {
		annot map[string]string
		want  *compute.ProcessDumps
	}{
		{nil, nil},
		{map[string]string{"io.microsoft.container.processdumplocation": `C:\dumps`}, &compute.ProcessDumps{Folder: `C:\dumps`, Type: compute.DumpFull, Count: 10}},
		{map[string]string{"io.microsoft.container.processdumplocation": `C:\d\{container_id}`, "io.microsoft.wcow.processdumptype": "mini", "io.microsoft.wcow.processdumpcount": "3"},
			&compute.ProcessDumps{Folder: `C:\d\{container_id}`, Type: compute.DumpMini, Count: 3}},
	} {
		spec := baseSpec()
		spec.Annotations = tc.annot
		s, _, err := FromSpec(spec, baseRootfs(), hostCPUs)
		if err != nil || !reflect.DeepEqual(s.ProcessDumps, tc.want) {
			t.Errorf("%v: dumps %+v, %v; want %+v", tc.annot, s.ProcessDumps, err, tc.want)
		}
	}
}

// The gMSA switches only forbid a credential spec; false, or no credential
// spec, is fine.
func TestGMSAAnnotationsAllow(t *testing.T) {
	for _, tc := range []struct {
		annot map[string]string
		cred  any
	}{
		{map[string]string{"io.microsoft.container.wcow.gmsa.disable": "false"}, `{"CmsPlugins":["ActiveDirectory"]}`},
		{map[string]string{"io.microsoft.container.wcow.gmsa.disable": "true", "io.microsoft.disable-unsafe-operations": "true"}, nil},
	} {
		spec := baseSpec()
		spec.Annotations = tc.annot
		spec.Windows.CredentialSpec = tc.cred
		if _, _, err := FromSpec(spec, baseRootfs(), hostCPUs); err != nil {
			t.Errorf("%v with credential spec %v: %v", tc.annot, tc.cred, err)
		}
	}
}
