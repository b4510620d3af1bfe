package specconv

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// hostProcessSpec is a HostProcess container's spec as containerd's CRI
// makes it: the annotation, the host's network (an empty network section),
// a host account, and C:\hpc as the working directory.
func hostProcessSpec() *specs.Spec {
	spec := baseSpec()
	spec.Annotations = map[string]string{"microsoft.com/hostprocess-container": "true"}
	spec.Windows.Network = &specs.WindowsNetwork{}
	spec.Process.User.Username = `NT AUTHORITY\SYSTEM`
	spec.Process.Cwd = `C:\hpc`
	return spec
}

func TestFromSpecHostProcess(t *testing.T) {
	s, p, err := FromSpec(hostProcessSpec(), baseRootfs(), hostCPUs)
	if err != nil {
		t.Fatal(err)
	}
	if s.HostProcess == nil || s.HostProcess.InheritUser || s.HostName != "" || s.Layers.Scratch != baseLayer.Path || len(s.MappedDirectories) != 1 {
		t.Errorf("settings %+v", s)
	}
	if p.User != `NT AUTHORITY\SYSTEM` || p.WorkingDirectory != "" {
		t.Errorf("process %+v", p)
	}
	spec := hostProcessSpec()
	spec.Annotations["microsoft.com/hostprocess-container"] = "True"
	spec.Annotations["microsoft.com/hostprocess-inherit-user"] = "true"
	spec.Process.User.Username = ""
	if s, _, err := FromSpec(spec, baseRootfs(), hostCPUs); err != nil || s.HostProcess == nil || !s.HostProcess.InheritUser {
		t.Errorf("inherit-user: %+v, %v", s, err)
	}
	spec = baseSpec()
	spec.Annotations = map[string]string{"microsoft.com/hostprocess-container": "false"}
	if s, _, err := FromSpec(spec, baseRootfs(), hostCPUs); err != nil || s.HostProcess != nil {
		t.Errorf("hostprocess-container=false: %+v, %v", s, err)
	}
}

// What a process on the host cannot have is refused, naming the field.
func TestFromSpecHostProcessRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*specs.Spec)
		want   string
	}{
		{"no user", func(s *specs.Spec) { s.Process.User.Username = "" }, "runAsUserName"},
		{"inherit-user not a bool", func(s *specs.Spec) { s.Annotations["microsoft.com/hostprocess-inherit-user"] = "yes" }, "microsoft.com/hostprocess-inherit-user"},
		{"pod network", func(s *specs.Spec) { s.Windows.Network.NetworkNamespace = "0f6c3a6e-1a2b-4c3d-8e9f-001122334455" }, "spec.windows.network"},
		{"named pipe", func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Source: `\\.\pipe\docker_engine`, Destination: `\\.\pipe\docker_engine`})
		}, `spec.mounts: \\.\pipe\docker_engine`},
		{"gMSA", func(s *specs.Spec) {
			s.Windows.CredentialSpec = map[string]any{"CmsPlugins": []string{"ActiveDirectory"}}
		}, "spec.windows.credentialSpec"},
		{"devices", func(s *specs.Spec) {
			s.Windows.Devices = []specs.WindowsDevice{{ID: "5B45201D-F2F2-4F3B-85BB-30FF1F953599", IDType: "class"}}
		}, "spec.windows.devices"},
		{"dumps", func(s *specs.Spec) { s.Annotations["io.microsoft.container.processdumplocation"] = `C:\dumps` }, "processdumplocation"},
		{"storage limits", func(s *specs.Spec) {
			s.Windows.Resources.Storage = &specs.WindowsStorageResources{Iops: ptr(uint64(100))}
		}, "spec.windows.resources.storage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := hostProcessSpec()
			tc.change(spec)
			_, _, err := FromSpec(spec, baseRootfs(), hostCPUs)
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("FromSpec = %v, want InvalidArgument naming %q", err, tc.want)
			}
		})
	}
}

func TestHostProcessWorkingDir(t *testing.T) {
	for in, want := range map[string]string{
		`C:\hpc`:       "",
		`c:\HPC\`:      "",
		`C:\hpc\bin`:   "bin",
		`C:\hpc\a\b\`:  `a\b`,
		`C:\hpcx`:      `C:\hpcx`,
		`C:\Windows`:   `C:\Windows`,
		`D:\hpc`:       `D:\hpc`,
		"":             "",
		`relative\dir`: `relative\dir`,
	} {
		if got := HostProcessWorkingDir(in); got != want {
			t.Errorf("HostProcessWorkingDir(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckPodKind(t *testing.T) {
	for _, tc := range []struct {
		name        string
		spec        *specs.Spec
		hostProcess bool
		want        string // "" for no error
	}{
		{"ordinary in ordinary", baseSpec(), false, ""},
		{"HostProcess in HostProcess", hostProcessSpec(), true, ""},
		{"ordinary in HostProcess", baseSpec(), true, "securityContext.windowsOptions.hostProcess: true"},
		{"HostProcess in ordinary", hostProcessSpec(), false, "spec.securityContext.windowsOptions.hostProcess: true"},
	} {
		err := CheckPodKind(tc.spec, tc.hostProcess)
		if (tc.want == "") != (err == nil) || (err != nil && (!errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
