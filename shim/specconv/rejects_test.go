// What FromSpec refuses, each refusal naming the spec's field or the fix.

package specconv

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// rejectCases are specs FromSpec refuses, each by a change to baseSpec.
var rejectCases = []struct {
	name   string
	change func(s *specs.Spec, rootfs *[]mount.Mount)
	// want is a piece of the message: the field it names or the fix.
	want string
}{
	// Not a process-isolated Windows spec.
	{"no windows section", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows = nil }, "not a Windows spec"},
	{"hyperv", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.HyperV = &specs.WindowsHyperV{} }, "remove the hyperv section or use runhcs"},
	{"linux", func(s *specs.Spec, _ *[]mount.Mount) { s.Linux = &specs.Linux{} }, "spec.linux"},
	{"solaris", func(s *specs.Spec, _ *[]mount.Mount) { s.Solaris = &specs.Solaris{} }, "spec.solaris"},
	{"vm", func(s *specs.Spec, _ *[]mount.Mount) { s.VM = &specs.VM{} }, "spec.vm"},
	{"zos", func(s *specs.Spec, _ *[]mount.Mount) { s.ZOS = &specs.ZOS{} }, "spec.zos"},
	{"freebsd", func(s *specs.Spec, _ *[]mount.Mount) { s.FreeBSD = &specs.FreeBSD{} }, "spec.freebsd"},
	{"domainname", func(s *specs.Spec, _ *[]mount.Mount) { s.Domainname = "corp" }, "spec.domainname"},
	{"hooks", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Hooks = &specs.Hooks{Poststop: []specs.Hook{{Path: `C:\x.exe`}}}
	}, "spec.hooks"},
	{"servicing", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.Servicing = true }, "spec.windows.servicing"},
	{"readonly root", func(s *specs.Spec, _ *[]mount.Mount) { s.Root = &specs.Root{Readonly: true} }, "spec.root.readonly"},
	{"root path", func(s *specs.Spec, _ *[]mount.Mount) { s.Root = &specs.Root{Path: `\\?\Volume{x}\`} }, "spec.root.path"},

	// Layers.
	{"rootfs and layer folders", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.LayerFolders = []string{`C:\l\1`, `C:\l\scratch`}
	}, "pass only one"},
	{"no layers", func(_ *specs.Spec, r *[]mount.Mount) { *r = nil }, "neither a rootfs mount nor spec.windows.layerFolders"},
	{"two rootfs mounts", func(_ *specs.Spec, r *[]mount.Mount) { *r = append(*r, baseLayer.Mount()) }, "2 mounts"},
	{"overlay rootfs", func(_ *specs.Spec, r *[]mount.Mount) {
		*r = []mount.Mount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/a"}}}
	}, `type "overlay"`},
	{"cimfs rootfs", func(_ *specs.Spec, r *[]mount.Mount) { (*r)[0].Type = "CimFS" }, "CimFS layers are not supported"},
	{"rootfs target", func(_ *specs.Spec, r *[]mount.Mount) { (*r)[0].Target = "sub" }, "leave target empty"},
	{"rootfs without parents", func(_ *specs.Spec, r *[]mount.Mount) {
		*r = []mount.Mount{layermount.Layer{Path: `C:\s\1`}.Mount()}
	}, "no parent layers"},
	{"rootfs empty parent", func(_ *specs.Spec, r *[]mount.Mount) {
		(*r)[0].Options = []string{"rw", `parentLayerPaths=["C:\\s\\2",""]`}
	}, "empty parent layer path"},
	{"rootfs bad parents JSON", func(_ *specs.Spec, r *[]mount.Mount) {
		(*r)[0].Options = []string{"rw", `parentLayerPaths=[oops`}
	}, "not a JSON list"},
	{"rootfs parent is scratch", func(_ *specs.Spec, r *[]mount.Mount) {
		*r = []mount.Mount{layermount.Layer{Path: `C:\s\2`, Parents: []string{`c:\S\2`}}.Mount()}
	}, "appears twice"},
	{"rootfs relative", func(_ *specs.Spec, r *[]mount.Mount) {
		*r = []mount.Mount{layermount.Layer{Path: `snapshots\2`, Parents: []string{`C:\s\1`}}.Mount()}
	}, "not absolute"},
	{"one layer folder", func(s *specs.Spec, r *[]mount.Mount) {
		*r = nil
		s.Windows.LayerFolders = []string{`C:\l\scratch`}
	}, "at least 2"},
	{"empty layer folder", func(s *specs.Spec, r *[]mount.Mount) {
		*r = nil
		s.Windows.LayerFolders = []string{`C:\l\1`, "", `C:\l\scratch`}
	}, "layer path is empty"},
	{"duplicate layer folder", func(s *specs.Spec, r *[]mount.Mount) {
		*r = nil
		s.Windows.LayerFolders = []string{`C:\l\1`, `C:\L\1`, `C:\l\scratch`}
	}, "appears twice"},

	// Mounts.
	{"tmpfs mount", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Type = "tmpfs" }, `type "tmpfs"`},
	{"virtual disk mount", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Type = "virtual-disk" }, "Hyper-V"},
	{"id-mapped mount", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Mounts[0].UIDMappings = []specs.LinuxIDMapping{{Size: 1}}
	}, "spec.mounts[0] has uidMappings"},
	{"mount without source", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Source = "" }, "spec.mounts[0] has no source"},
	{"mount without destination", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = "" }, "has no destination"},
	{"sandbox mount", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Source = "sandbox:///x" }, "utility VM"},
	{"nosuid option", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Options = []string{"rw", "nosuid"} }, `option "nosuid"`},
	{"rshared option", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Options = []string{"rshared"} }, `option "rshared"`},
	{"relative destination", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = "data" }, "not an absolute Windows path"},
	{"destination without drive", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `\data` }, "not an absolute Windows path"},
	{"drive-relative destination", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `D:data` }, `write it as D:\data`},
	{"system drive", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `c:` }, "system drive"},
	{"system drive root", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `C:\data\..` }, "system drive"},
	{"destination above root", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `C:\..\x` }, "climbs above"},
	{"destination bad character", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `C:\data\a|b` }, "'|'"},
	{"relative source", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Source = `data` }, "not an absolute host path"},
	{"pipe onto directory", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Source = `\\.\pipe\docker_engine` }, "onto a \\\\.\\pipe\\NAME destination"},
	{"directory onto pipe", func(s *specs.Spec, _ *[]mount.Mount) { s.Mounts[0].Destination = `\\.\pipe\x` }, "only a host named pipe"},
	{"pipe without name", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Mounts[0].Source, s.Mounts[0].Destination = `\\.\pipe\a`, `\\.\pipe\`
	}, "needs a name"},
	{"duplicate destination", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Mounts = append(s.Mounts, specs.Mount{Source: `C:\other`, Destination: `c:/DATA/`})
	}, `spec.mounts[1] and spec.mounts[0] both map to C:\DATA`},
	{"duplicate pipe", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Mounts = []specs.Mount{
			{Source: `\\.\pipe\a`, Destination: `\\.\pipe\x`},
			{Source: `\\.\pipe\b`, Destination: `\\.\PIPE\X`},
		}
	}, "both map to pipe"},

	// Resources.
	{"count and maximum", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Count: ptr[uint64](2), Maximum: ptr[uint16](5000)}
	}, "count (2) and maximum (5000)"},
	{"maximum and shares", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Maximum: ptr[uint16](5000), Shares: ptr[uint16](10)}
	}, "maximum (5000) and shares (10)"},
	{"count and shares", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Count: ptr[uint64](1), Shares: ptr[uint16](10)}
	}, "count (1) and shares (10)"},
	{"all three", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Count: ptr[uint64](1), Maximum: ptr[uint16](1), Shares: ptr[uint16](1)}
	}, "keep one"},
	{"maximum too high", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Maximum: ptr[uint16](10001)}
	}, "spec.windows.resources.cpu.maximum is 10001"},
	{"shares too high", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Shares: ptr[uint16](10001)}
	}, "spec.windows.resources.cpu.shares is 10001"},
	{"affinity zero mask", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 0, Group: 1}}}
	}, "affinity[0] has an empty mask"},
	{"affinity group twice", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1}, {Mask: 2}}}
	}, "group 0 twice"},
	{"affinity group too large", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Resources.CPU = &specs.WindowsCPUResources{Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1, Group: 70000}}}
	}, "group 70000"},

	// Network, credential spec, devices.
	{"empty endpoint", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.Network.EndpointList = []string{"a", ""} }, "endpointList[1]"},
	{"DNS suffix with comma", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Network.DNSSearchList = []string{"a.local,b.local"}
	}, "DNSSearchList[0]"},
	{"credential spec not JSON", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.CredentialSpec = "file://cred.json" }, "not a JSON object"},
	{"credential spec number", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.CredentialSpec = 42 }, "got a int"},
	{"credential spec array", func(s *specs.Spec, _ *[]mount.Mount) { s.Windows.CredentialSpec = []any{"a"} }, "spec.windows.credentialSpec"},
	{"unknown device type", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Devices = []specs.WindowsDevice{{IDType: "instance", ID: "PCI\\VEN_1"}}
	}, `idType "instance"`},
	{"empty location path", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Devices = []specs.WindowsDevice{{IDType: "vpci-location-path"}}
	}, `empty location path`},
	{"device not a GUID", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Windows.Devices = []specs.WindowsDevice{{IDType: "class", ID: "gpu"}}
	}, `id "gpu"`},

	// Process.
	{"no process", func(s *specs.Spec, _ *[]mount.Mount) { s.Process = nil }, "spec.process is missing"},
	{"no command", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Args = nil }, "neither args nor commandLine"},
	{"empty program", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Args = []string{"", "x"} }, "spec.process.args[0] is empty"},
	{"env without =", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Env = []string{"A=1", "JUSTNAME"} }, `spec.process.env[1] (CRI envs) is "JUSTNAME"`},
	// Windows' own limits (package internal/validation).
	{"env value past Windows' limit", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Process.Env = []string{"A=1", "BIG=" + strings.Repeat("x", 32768)}
	}, `spec.process.env[1] (CRI envs), variable "BIG", has a value of 32768 characters`},
	{"env with a NUL", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Env = []string{"A=1\x00"} }, `spec.process.env[0] (CRI envs), variable "A", contains a NUL`},
	{"args past CreateProcess's limit", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Process.Args = []string{"cmd.exe", "/c", strings.Repeat("x", 32760)}
	}, "spec.process.args (CRI command and args) make a command line of 32771 characters"},
	{"commandLine past CreateProcess's limit", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Process.CommandLine = strings.Repeat("x", 32767)
	}, "spec.process.commandLine (CRI command and args) make a command line of 32767 characters"},
	{"user with a forward slash", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.User.Username = "NT AUTHORITY/SYSTEM" },
		`spec.process.user.username "NT AUTHORITY/SYSTEM" (CRI run_as_username`},
	{"env without name", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Env = []string{"=1"} }, "no name before '='"},
	{"capabilities", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Capabilities = &specs.LinuxCapabilities{} }, "spec.process.capabilities"},
	{"rlimits", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1, Soft: 1}}
	}, "spec.process.rlimits"},
	{"noNewPrivileges", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.NoNewPrivileges = true }, "spec.process.noNewPrivileges"},
	{"apparmor", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.ApparmorProfile = "x" }, "spec.process.apparmorProfile"},
	{"oomScoreAdj", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.OOMScoreAdj = ptr(0) }, "spec.process.oomScoreAdj"},
	{"scheduler", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.Scheduler = &specs.Scheduler{} }, "spec.process.scheduler"},
	{"selinux", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.SelinuxLabel = "x" }, "spec.process.selinuxLabel"},
	{"ioPriority", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.IOPriority = &specs.LinuxIOPriority{} }, "spec.process.ioPriority"},
	{"execCPUAffinity", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.ExecCPUAffinity = &specs.CPUAffinity{} }, "spec.process.execCPUAffinity"},
	{"umask", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.User.Umask = ptr[uint32](0o22) }, "spec.process.user.umask"},
	{"uid", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.User.UID = 1000 }, "uid 1000"},
	{"gid", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.User.GID = 1000 }, "gid 1000"},
	{"additional gid", func(s *specs.Spec, _ *[]mount.Mount) { s.Process.User.AdditionalGids = []uint32{0, 27} }, "additionalGids has 27"},
	{"console too wide", func(s *specs.Spec, _ *[]mount.Mount) {
		s.Process.Terminal = true
		s.Process.ConsoleSize = &specs.Box{Width: 70000, Height: 30}
	}, "consoleSize is 70000x30"},
}

func TestFromSpecRejects(t *testing.T) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			spec, rootfs := baseSpec(), baseRootfs()
			tc.change(spec, &rootfs)
			s, p, err := FromSpec(spec, rootfs, hostCPUs)
			if err == nil {
				t.Fatalf("FromSpec succeeded: %#v %#v", s, p)
			}
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("error %q is not InvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
