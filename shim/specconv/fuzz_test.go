package specconv

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/winpath"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// fromSpecSeed is a seed of FuzzFromSpec: a change to baseSpec and the
// rootfs, or baseSpec's own layer.
type fromSpecSeed struct {
	change       func(*specs.Spec)
	rootfs       []mount.Mount
	useBaseLayer bool
}

// fromSpecSeeds are FuzzFromSpec's seeds: specs FromSpec accepts (settings
// tests') and a sample of those it refuses.
func fromSpecSeeds(f *testing.F) []fromSpecSeed {
	containerd, err := oci.GenerateSpecWithPlatform(context.Background(), nil, "windows/amd64", &containers.Container{ID: "c1"},
		oci.WithProcessArgs("cmd", "/c", "echo hi"), oci.WithProcessCwd(`C:\work`), oci.WithEnv([]string{"A=1"}),
		oci.WithUser("ContainerAdministrator"), oci.WithHostname("pod"), oci.WithWindowsNetworkNamespace("ns-guid"), oci.WithTTY)
	if err != nil {
		f.Fatal(err)
	}
	return []fromSpecSeed{
		// Accepted: settings_test.go's specs.
		{useBaseLayer: true},
		{change: func(s *specs.Spec) { *s = *containerd }, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.LayerFolders = []string{`C:\s\3`, `C:\s\2`, `C:\s\1`, `C:\s\9`}
		}},
		{change: func(s *specs.Spec) {
			s.Windows.Resources = &specs.WindowsResources{
				CPU:     &specs.WindowsCPUResources{Count: ptr[uint64](64), Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 0x3}, {Mask: 0xf0, Group: 1}}},
				Memory:  &specs.WindowsMemoryResources{Limit: ptr[uint64](512<<20 + 1)},
				Storage: &specs.WindowsStorageResources{Iops: ptr[uint64](300), Bps: ptr[uint64](1 << 20), SandboxSize: ptr[uint64](40 << 30)},
			}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.Resources.CPU = &specs.WindowsCPUResources{Count: ptr[uint64](0), Maximum: ptr[uint16](0), Shares: ptr[uint16](500)}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Mounts = []specs.Mount{
				{Source: `C:\host\ro`, Destination: `c:/data/config/`, Options: []string{"RO"}},
				{Source: `C:\host\both`, Destination: `C:\x\y\..\z`, Options: []string{"rw", "ro", "rbind", "rprivate"}},
				{Source: `\\?\Volume{0f6c3a6e-1a2b-4c3d-8e9f-001122334455}\`, Destination: `e:\`, Type: "bind"},
				{Source: `\\fileserver\share`, Destination: `D:`},
				{Source: "/srv/emulated/data", Destination: `C:\emulated`},
				{Source: `\\.\pipe\docker_engine`, Destination: `\\.\pipe\docker_engine`, Options: []string{"ro"}},
				{Source: `\\.\PIPE\host-agent`, Destination: `\\.\pipe\agent`},
			}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.Network = &specs.WindowsNetwork{
				EndpointList: []string{"ep-1", "ep-2"}, AllowUnqualifiedDNSQuery: true,
				DNSSearchList: []string{"default.svc.cluster.local"}, NetworkSharedContainerName: "pause-1", NetworkNamespace: "ns-1",
			}
			s.Windows.Devices = []specs.WindowsDevice{
				{IDType: "class", ID: "5B45201D-F2F2-4F3B-85BB-30FF1F953599"},
				{IDType: "vpci-class-guid", ID: "{86e0d1e0-8089-11d0-9ce4-08003e301f73}"},
			}
			s.Windows.IgnoreFlushesDuringBoot = true
			s.Windows.CredentialSpec = map[string]any{"DomainJoinConfig": map[string]any{"MachineAccountName": "webapp01"}}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Process = &specs.Process{Args: []string{`C:\Program Files\app.exe`, `say "hi"`, ""}, Env: []string{"EMPTY=", "EQ=a=b"},
				Terminal: true, ConsoleSize: &specs.Box{Height: 40, Width: 120}}
			s.Windows.CredentialSpec = `{"DomainJoinConfig":{"MachineAccountName":"webapp01"}}`
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Process.CommandLine = `cmd /S /C "echo a && echo b"` }, useBaseLayer: true},
		// Refused: a sample of TestFromSpecRejects.
		{change: func(s *specs.Spec) { s.Windows = nil }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Windows.HyperV = &specs.WindowsHyperV{} }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Linux = &specs.Linux{} }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Hooks = &specs.Hooks{Poststop: []specs.Hook{{Path: `C:\x.exe`}}} }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Root = &specs.Root{Path: `\\?\Volume{x}\`} }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Windows.LayerFolders = []string{`C:\l\1`, `C:\L\1`, `C:\l\scratch`} }},
		{change: func(s *specs.Spec) { s.Windows.LayerFolders = []string{`C:\l\scratch`} }},
		{rootfs: []mount.Mount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/a"}}}},
		{rootfs: []mount.Mount{layermount.Layer{Path: `C:\s\4`, ReadOnly: true, Parents: []string{`C:\s\1`}}.Mount()}},
		{rootfs: []mount.Mount{{Type: layermount.Type, Source: `C:\s\3`, Options: []string{"rw", `parentLayerPaths=["C:\\s\\2",""]`}}}},
		{rootfs: []mount.Mount{layermount.Layer{Path: `C:\s\2`, Parents: []string{`c:\S\2`}}.Mount()}},
		{change: func(s *specs.Spec) { s.Mounts[0].Type = "virtual-disk" }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Mounts[0].Destination = `C:\..\x` }, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Source: `C:\other`, Destination: `c:/DATA/`})
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Mounts = []specs.Mount{{Source: `\\.\pipe\a`, Destination: `\\.\pipe\x`}, {Source: `\\.\pipe\b`, Destination: `\\.\PIPE\X`}}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.Resources.CPU = &specs.WindowsCPUResources{Count: ptr[uint64](2), Maximum: ptr[uint16](5000)}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.Resources.CPU = &specs.WindowsCPUResources{Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1, Group: 70000}}}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Windows.CredentialSpec = 42 }, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Windows.Devices = []specs.WindowsDevice{{IDType: "vpci-location-path", ID: "PCIROOT(0)"}, {IDType: "vpci-location-path"}}
		}, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Process.Env = []string{"A=1", "JUSTNAME"} }, useBaseLayer: true},
		{change: func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{0, 27} }, useBaseLayer: true},
		{change: func(s *specs.Spec) {
			s.Process.Terminal, s.Process.ConsoleSize = true, &specs.Box{Width: 70000, Height: 30}
		}, useBaseLayer: true},
	}
}

// FuzzFromSpec translates fuzzed OCI specs, given as JSON as containerd
// writes config.json, with a fuzzed rootfs mount (none when rootfsType is
// empty; options split at newlines). The translation must not panic, must
// refuse with errdefs.ErrInvalidArgument only, and what it accepts must hold
// the invariants the shim and the backends rely on; ProcessFromSpec and
// ResourcesFromSpec must agree with it.
func FuzzFromSpec(f *testing.F) {
	for i, sd := range fromSpecSeeds(f) {
		spec := baseSpec()
		if sd.change != nil {
			sd.change(spec)
		}
		data, err := json.Marshal(spec)
		if err != nil {
			f.Fatal(err)
		}
		rootfs := sd.rootfs
		if sd.useBaseLayer {
			rootfs = baseRootfs()
		}
		var typ, source, options string
		if len(rootfs) == 1 {
			typ, source, options = rootfs[0].Type, rootfs[0].Source, strings.Join(rootfs[0].Options, "\n")
		}
		f.Add(data, typ, source, options, uint8(1+i%8))
	}

	f.Fuzz(checkFromSpec)
}

// checkFromSpec checks FromSpec on one input: a refusal is InvalidArgument
// alone; accepted settings keep every rule, and the exec and update
// translations agree with it.
func checkFromSpec(t *testing.T, data []byte, rootfsType, rootfsSource, rootfsOptions string, cpus uint8) {
	var spec specs.Spec
	if json.Unmarshal(data, &spec) != nil {
		t.Skip()
	}
	var rootfs []mount.Mount
	if rootfsType != "" {
		var opts []string
		if rootfsOptions != "" {
			opts = strings.Split(rootfsOptions, "\n")
		}
		rootfs = []mount.Mount{{Type: rootfsType, Source: rootfsSource, Options: opts}}
	}
	hostCPUs := int(cpus)

	s, p, err := FromSpec(&spec, rootfs, hostCPUs)
	if err != nil {
		if !errdefs.IsInvalidArgument(err) || s != nil || p != nil {
			t.Fatalf("FromSpec = %v, %v, %v; want only an invalid argument error", s, p, err)
		}
		return
	}
	if hostCPUs < 1 {
		t.Fatalf("FromSpec accepted %d host processors", hostCPUs)
	}
	checkLayers(t, s.Layers, rootfs, spec.Windows.LayerFolders)
	checkResources(t, s.Resources, hostCPUs)
	checkMounts(t, s.MappedDirectories, s.MappedPipes, len(spec.Mounts))
	checkSettings(t, s, &spec)
	checkProcess(t, p, spec.Process)

	// The exec and update translations follow the same rules.
	p2, err := ProcessFromSpec(spec.Process)
	if err != nil || !reflect.DeepEqual(p2, p) {
		t.Fatalf("ProcessFromSpec = %#v, %v; FromSpec gave %#v", p2, err, p)
	}
	res := spec.Windows.Resources
	r, err := ResourcesFromSpec(res, hostCPUs)
	if res != nil && res.Storage != nil && res.Storage.SandboxSize != nil {
		// The system drive's size is fixed at creation.
		if !errdefs.IsInvalidArgument(err) || *res.Storage.SandboxSize != s.SandboxSizeBytes {
			t.Fatalf("ResourcesFromSpec with a sandbox size = %v", err)
		}
	} else if err != nil || !reflect.DeepEqual(r, s.Resources) || s.SandboxSizeBytes != 0 {
		t.Fatalf("ResourcesFromSpec = %#v, %v; FromSpec gave %#v", r, err, s.Resources)
	}
}

func checkLayers(t *testing.T, l compute.Layers, rootfs []mount.Mount, folders []string) {
	t.Helper()
	if len(l.Parents) == 0 {
		t.Fatalf("no parent layers: %#v", l)
	}
	seen := make(map[string]bool)
	for _, p := range append([]string{l.Scratch}, l.Parents...) {
		if !winpath.IsAbsHostPath(p) || seen[strings.ToLower(p)] {
			t.Fatalf("layer %q is relative or repeated in %#v", p, l)
		}
		seen[strings.ToLower(p)] = true
	}
	if len(rootfs) > 0 {
		if len(folders) > 0 {
			t.Fatal("accepted both a rootfs and layer folders")
		}
		d, err := layermount.Decode(rootfs)
		if err != nil || d.Path != l.Scratch || !slices.Equal(d.Parents, l.Parents) {
			t.Fatalf("layers %#v from rootfs %#v (%#v, %v)", l, rootfs, d, err)
		}
		return
	}
	if !slices.Equal(append(slices.Clone(l.Parents), l.Scratch), folders) {
		t.Fatalf("layers %#v from folders %q", l, folders)
	}
}

func checkResources(t *testing.T, r compute.Resources, hostCPUs int) {
	t.Helper()
	set := 0
	for _, v := range []bool{r.CPUCount != 0, r.CPUMaximum != 0, r.CPUWeight != 0} {
		if v {
			set++
		}
	}
	switch {
	case set > 1:
		t.Fatalf("more than one of CPU count, maximum and weight: %#v", r)
	case int(r.CPUCount) > hostCPUs:
		t.Fatalf("CPU count %d above the host's %d", r.CPUCount, hostCPUs)
	case r.CPUCountCapped != (r.RequestedCPUCount != 0):
		t.Fatalf("CPUCountCapped %v with a requested count of %d", r.CPUCountCapped, r.RequestedCPUCount)
	case r.CPUCountCapped && (int(r.CPUCount) != hostCPUs || r.RequestedCPUCount <= uint64(hostCPUs)):
		t.Fatalf("capped to %d of %d host processors from %d", r.CPUCount, hostCPUs, r.RequestedCPUCount)
	case r.CPUMaximum > 10000 || r.CPUWeight > 10000:
		t.Fatalf("CPU maximum %d or weight %d above 10000", r.CPUMaximum, r.CPUWeight)
	}
	groups := make(map[uint16]bool)
	for _, a := range r.CPUAffinity {
		if a.Mask == 0 || groups[a.Group] {
			t.Fatalf("affinity %#v", r.CPUAffinity)
		}
		groups[a.Group] = true
	}
	// Rounded up to whole MiB, never to 0 (no limit).
	if mb, floor := r.MemoryLimitMB(), r.MemoryLimitBytes>>20; mb < floor || mb > floor+1 || (r.MemoryLimitBytes != 0) != (mb != 0) {
		t.Fatalf("memory limit of %d bytes is %d MiB", r.MemoryLimitBytes, mb)
	}
}

func checkMounts(t *testing.T, dirs []compute.MappedDirectory, pipes []compute.MappedPipe, n int) {
	t.Helper()
	if len(dirs)+len(pipes) != n {
		t.Fatalf("%d directories and %d pipes from %d mounts", len(dirs), len(pipes), n)
	}
	seen := make(map[string]bool)
	for _, d := range dirs {
		norm, err := winpath.ContainerPath(d.ContainerPath)
		switch {
		case !winpath.IsAbsHostPath(d.HostPath):
			t.Fatalf("mapped relative host path %q", d.HostPath)
		case err != nil || norm != d.ContainerPath:
			t.Fatalf("container path %q is not normalised (%q, %v)", d.ContainerPath, norm, err)
		case d.ContainerPath[0] < 'A' || d.ContainerPath[0] > 'Z' || strings.EqualFold(d.ContainerPath, "C:"):
			t.Fatalf("container path %q", d.ContainerPath)
		case seen[strings.ToLower(d.ContainerPath)]:
			t.Fatalf("two mounts onto %q", d.ContainerPath)
		}
		seen[strings.ToLower(d.ContainerPath)] = true
	}
	for _, p := range pipes {
		name, ok := winpath.PipeName(p.HostPath)
		if !ok || name == "" || p.ContainerPipeName == "" || seen[strings.ToLower(winpath.PipePrefix+p.ContainerPipeName)] {
			t.Fatalf("mapped pipe %#v", p)
		}
		seen[strings.ToLower(winpath.PipePrefix+p.ContainerPipeName)] = true
	}
}

func checkSettings(t *testing.T, s *compute.Settings, spec *specs.Spec) {
	t.Helper()
	w := spec.Windows
	if s.HostName != spec.Hostname {
		t.Fatalf("settings %#v for spec hostname %q", s, spec.Hostname)
	}
	if s.CredentialSpec != "" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(s.CredentialSpec), &obj); err != nil || obj == nil {
			t.Fatalf("credential spec %q is not a JSON object", s.CredentialSpec)
		}
	} else if cs, ok := w.CredentialSpec.(string); w.CredentialSpec != nil && !(ok && cs == "") {
		t.Fatalf("credential spec %#v dropped", w.CredentialSpec)
	}
	for _, d := range s.AssignedDevices {
		if d.Kind == compute.DeviceClass && !guidPattern.MatchString(d.ID) || d.ID == "" {
			t.Fatalf("assigned device %+v has no usable id", d)
		}
	}
	n := s.Network
	for _, e := range n.Endpoints {
		if e == "" {
			t.Fatal("empty endpoint")
		}
	}
	for _, d := range n.DNSSearchList {
		if d == "" || strings.ContainsAny(d, ", \t") {
			t.Fatalf("DNS suffix %q", d)
		}
	}
	if w.Network != nil && (n.Namespace != w.Network.NetworkNamespace || len(n.Endpoints) != len(w.Network.EndpointList)) {
		t.Fatalf("network %#v from %#v", n, w.Network)
	}
}

func checkProcess(t *testing.T, p *compute.ProcessSettings, sp *specs.Process) {
	t.Helper()
	if p.CommandLine == "" || p.WorkingDirectory == "" {
		t.Fatalf("process %#v has no command line or directory", p)
	}
	if !p.Terminal && (p.ConsoleWidth != 0 || p.ConsoleHeight != 0) {
		t.Fatalf("console size without a terminal: %#v", p)
	}
	for _, e := range p.Env {
		if name, _, ok := strings.Cut(e, "="); !ok || name == "" {
			t.Fatalf("environment entry %q", e)
		}
	}
	// A command line made from args splits back into them, when the
	// program path is one the C runtime can read back (see
	// SplitCommandLine): no quote, no trailing backslash.
	if sp.CommandLine == "" {
		prog := sp.Args[0]
		if !strings.Contains(prog, `"`) && !strings.HasSuffix(prog, `\`) {
			if got := wincmdline.SplitCommandLine(p.CommandLine); !slices.Equal(got, sp.Args) {
				t.Fatalf("args %q give command line %q, which splits into %q", sp.Args, p.CommandLine, got)
			}
		}
	} else if p.CommandLine != sp.CommandLine {
		t.Fatalf("commandLine %q became %q", sp.CommandLine, p.CommandLine)
	}
}
