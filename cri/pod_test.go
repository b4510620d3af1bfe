package cri

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/proto"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const credSpec = `{
  "CmsPlugins": ["ActiveDirectory"],
  "DomainJoinConfig": {
    "Sid": "S-1-5-21-702590844-1001920913-2680819671",
    "MachineAccountName": "WebApp01",
    "Guid": "56d9b66c-d746-4f87-bd26-26760cfdca2e",
    "DnsTreeName": "contoso.com",
    "DnsName": "contoso.com",
    "NetBiosName": "CONTOSO"
  },
  "ActiveDirectoryConfig": {
    "GroupManagedServiceAccounts": [
      {"Name": "WebApp01", "Scope": "contoso.com"},
      {"Name": "WebApp01", "Scope": "CONTOSO"}
    ]
  }
}`

// kubeletWindowsConfig is what the kubelet on a Windows node sends for an
// ordinary pod (kuberuntime_sandbox.go generatePodSandboxConfig): a Linux
// section is always there, with seccomp RuntimeDefault, pid CONTAINER and
// an empty sysctl map.
func kubeletWindowsConfig() *runtime.PodSandboxConfig {
	return &runtime.PodSandboxConfig{
		Metadata:     &runtime.PodSandboxMetadata{Name: "web-0", Namespace: "shop", Uid: "0b1c2d3e-uid", Attempt: 2},
		Hostname:     "web-0",
		LogDirectory: `C:\var\log\pods\shop_web-0_0b1c2d3e-uid`,
		DnsConfig: &runtime.DNSConfig{
			Servers:  []string{"10.96.0.10"},
			Searches: []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			Options:  []string{"ndots:5"},
		},
		PortMappings: []*runtime.PortMapping{
			{Protocol: runtime.Protocol_TCP, ContainerPort: 80},
			{Protocol: runtime.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "192.168.1.10"},
		},
		Labels:      map[string]string{"app": "web", "io.kubernetes.pod.name": "web-0"},
		Annotations: map[string]string{"kubernetes.io/config.source": "api"},
		Linux: &runtime.LinuxPodSandboxConfig{
			SecurityContext: &runtime.LinuxSandboxSecurityContext{
				Seccomp: &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault},
				NamespaceOptions: &runtime.NamespaceOption{
					Network: runtime.NamespaceMode_POD,
					Pid:     runtime.NamespaceMode_CONTAINER,
					Ipc:     runtime.NamespaceMode_POD,
				},
			},
			Sysctls: map[string]string{},
		},
		Windows: &runtime.WindowsPodSandboxConfig{
			SecurityContext: &runtime.WindowsSandboxSecurityContext{
				RunAsUsername:  `CONTOSO\WebApp01$`,
				CredentialSpec: credSpec,
			},
		},
	}
}

func withConfig(f func(*runtime.PodSandboxConfig)) *runtime.PodSandboxConfig {
	c := kubeletWindowsConfig()
	f(c)
	return c
}

func TestFromConfigKubeletWindowsPod(t *testing.T) {
	cfg := kubeletWindowsConfig()
	pod, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &Pod{
		Name: "web-0", Namespace: "shop", UID: "0b1c2d3e-uid", Attempt: 2,
		Hostname:     "web-0",
		LogDirectory: `C:\var\log\pods\shop_web-0_0b1c2d3e-uid`,
		DNS: DNS{
			Servers:        []string{"10.96.0.10"},
			Searches:       []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			IgnoredOptions: []string{"ndots:5"},
		},
		Network: Network{PortMappings: []PortMapping{
			{Protocol: "TCP", ContainerPort: 80},
			{Protocol: "UDP", ContainerPort: 53, HostPort: 5353, HostIP: "192.168.1.10"},
		}},
		RunAsUserName: `CONTOSO\WebApp01$`,
		GMSA:          &GMSA{CredentialSpec: credSpec, Account: "WebApp01", Domain: "contoso.com"},
		Labels:        map[string]string{"app": "web", "io.kubernetes.pod.name": "web-0"},
		Annotations:   map[string]string{"kubernetes.io/config.source": "api"},
	}
	if !proto.Equal(pod.Config, cfg) {
		t.Fatalf("pod.Config = %v, want the input config", pod.Config)
	}
	got := *pod
	got.Config = nil
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("FromConfig =\n%+v\nwant\n%+v", &got, want)
	}

	// The pod owns its copies.
	cfg.Labels["app"] = "changed"
	cfg.Annotations["x"] = "y"
	cfg.Metadata.Name = "changed"
	if pod.Labels["app"] != "web" || len(pod.Annotations) != 1 || pod.Config.GetMetadata().GetName() != "web-0" {
		t.Fatalf("pod shares the config's maps or message: %+v", pod)
	}
}

func TestFromConfigNeedsMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  *runtime.PodSandboxConfig
		want string
	}{
		{"nil config", nil, "no PodSandboxConfig"},
		{"no metadata", &runtime.PodSandboxConfig{Hostname: "web"}, "no metadata"},
		{"no name", &runtime.PodSandboxConfig{Metadata: &runtime.PodSandboxMetadata{Namespace: "shop"}}, "metadata.name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(tc.cfg)
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) || pod != nil {
				t.Fatalf("FromConfig = %v, %v; want invalid argument containing %q", pod, err, tc.want)
			}
		})
	}
	// A bare config with just a name is a pod (crictl can send that).
	pod, err := FromConfig(&runtime.PodSandboxConfig{Metadata: &runtime.PodSandboxMetadata{Name: "bare"}})
	if err != nil || pod.Hostname != "bare" || !pod.HostnameDefaulted {
		t.Fatalf("bare config: %+v, %v", pod, err)
	}
}

// fromConfig is FromConfig(cfg) for a table's row. With wantErr set, it
// checks the refusal (InvalidArgument, its message containing wantErr and
// each of names) and returns nil; otherwise it fails the test on an error
// and returns the pod.
func fromConfig(t *testing.T, cfg *runtime.PodSandboxConfig, wantErr string, names ...string) *Pod {
	t.Helper()
	pod, err := FromConfig(cfg)
	if wantErr == "" {
		if err != nil {
			t.Fatal(err)
		}
		return pod
	}
	if !errdefs.IsInvalidArgument(err) || pod != nil {
		t.Fatalf("FromConfig = %v, %v; want invalid argument containing %q", pod, err, wantErr)
	}
	for _, want := range append([]string{wantErr}, names...) {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("FromConfig error = %v, want it to contain %q", err, want)
		}
	}
	return nil
}

func secCtx(c *runtime.PodSandboxConfig) *runtime.LinuxSandboxSecurityContext {
	return c.Linux.SecurityContext
}

func TestFromConfigRefusesLinuxOnlyFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*runtime.PodSandboxConfig)
		want   []string // substrings of the error, the first the pod spec field
	}{
		{"hostPID", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.Pid = runtime.NamespaceMode_NODE },
			[]string{"spec.hostPID", "namespace_options.pid: NODE", "remove hostPID"}},
		{"hostIPC", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.Ipc = runtime.NamespaceMode_NODE },
			[]string{"spec.hostIPC", "namespace_options.ipc: NODE", "remove hostIPC"}},
		{"hostUsers false", func(c *runtime.PodSandboxConfig) {
			secCtx(c).NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD}
		}, []string{"spec.hostUsers: false", "remove hostUsers"}},
		{"seLinuxOptions", func(c *runtime.PodSandboxConfig) {
			secCtx(c).SelinuxOptions = &runtime.SELinuxOption{Level: "s0:c123,c456"}
		}, []string{"spec.securityContext.seLinuxOptions", "linux.security_context.selinux_options"}},
		{"sysctls", func(c *runtime.PodSandboxConfig) {
			c.Linux.Sysctls = map[string]string{"net.ipv4.ip_forward": "1", "kernel.shm_rmid_forced": "1"}
		}, []string{"spec.securityContext.sysctls", "kernel.shm_rmid_forced, net.ipv4.ip_forward"}},
		{"privileged", func(c *runtime.PodSandboxConfig) { secCtx(c).Privileged = true },
			[]string{"spec.containers[*].securityContext.privileged", "HostProcess"}},
		{"runAsUser", func(c *runtime.PodSandboxConfig) { secCtx(c).RunAsUser = &runtime.Int64Value{Value: 1000} },
			[]string{"spec.securityContext.runAsUser", "windowsOptions.runAsUserName"}},
		{"runAsUser 0", func(c *runtime.PodSandboxConfig) { secCtx(c).RunAsUser = &runtime.Int64Value{} },
			[]string{"spec.securityContext.runAsUser"}},
		{"runAsGroup", func(c *runtime.PodSandboxConfig) { secCtx(c).RunAsGroup = &runtime.Int64Value{Value: 3000} },
			[]string{"spec.securityContext.runAsGroup"}},
		{"supplementalGroups", func(c *runtime.PodSandboxConfig) { secCtx(c).SupplementalGroups = []int64{2000} },
			[]string{"spec.securityContext.supplementalGroups", "fsGroup"}},
		{"supplementalGroupsPolicy Strict", func(c *runtime.PodSandboxConfig) {
			secCtx(c).SupplementalGroupsPolicy = runtime.SupplementalGroupsPolicy_Strict
		}, []string{"spec.securityContext.supplementalGroupsPolicy", "Strict"}},
		{"seccomp Localhost", func(c *runtime.PodSandboxConfig) {
			secCtx(c).Seccomp = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: "/var/lib/kubelet/seccomp/audit.json"}
		}, []string{"spec.securityContext.seccompProfile", "audit.json"}},
		{"seccomp profile path", func(c *runtime.PodSandboxConfig) {
			secCtx(c).SeccompProfilePath = "localhost/audit.json"
		}, []string{"spec.securityContext.seccompProfile", "seccomp_profile_path"}},
		{"apparmor Localhost", func(c *runtime.PodSandboxConfig) {
			secCtx(c).Apparmor = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}
		}, []string{"spec.securityContext.appArmorProfile", "k8s-deny-write"}},
		{"readOnlyRootFilesystem", func(c *runtime.PodSandboxConfig) { secCtx(c).ReadonlyRootfs = true },
			[]string{"readOnlyRootFilesystem", "linux.security_context.readonly_rootfs"}},
		{"pid TARGET", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.Pid = runtime.NamespaceMode_TARGET },
			[]string{"namespace_options.pid is TARGET"}},
		{"network CONTAINER", func(c *runtime.PodSandboxConfig) {
			secCtx(c).NamespaceOptions.Network = runtime.NamespaceMode_CONTAINER
		}, []string{"namespace_options.network is CONTAINER"}},
		{"target id", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.TargetId = "abc" },
			[]string{"target_id"}},
		{"windows network TARGET", func(c *runtime.PodSandboxConfig) {
			c.Windows.SecurityContext.NamespaceOptions = &runtime.WindowsNamespaceOption{Network: runtime.NamespaceMode_TARGET}
		}, []string{"windows.security_context.namespace_options.network is TARGET"}},
		{"negative overhead", func(c *runtime.PodSandboxConfig) {
			c.Linux.Overhead = &runtime.LinuxContainerResources{MemoryLimitInBytes: -1}
		}, []string{"linux.overhead", "negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(tc.mutate))
			if !errdefs.IsInvalidArgument(err) || pod != nil {
				t.Fatalf("FromConfig = %v, %v; want invalid argument", pod, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, `pod "shop/web-0" cannot run as a Windows process-isolated pod: `) {
				t.Errorf("error does not name the pod: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestFromConfigReportsEveryProblemAtOnce(t *testing.T) {
	_, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) {
		secCtx(c).NamespaceOptions.Pid = runtime.NamespaceMode_NODE
		secCtx(c).NamespaceOptions.Ipc = runtime.NamespaceMode_NODE
		c.Linux.Sysctls = map[string]string{"net.core.somaxconn": "1024"}
		c.Hostname = "bad_host"
		c.DnsConfig.Servers = []string{"dns.example"}
	}))
	if !errdefs.IsInvalidArgument(err) {
		t.Fatalf("err = %v", err)
	}
	for _, w := range []string{"spec.hostPID", "spec.hostIPC", "spec.securityContext.sysctls", `hostname "bad_host"`, `DNS server "dns.example"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	if n := strings.Count(err.Error(), "; "); n != 4 {
		t.Errorf("error has %d separators, want 4 (5 problems): %v", n, err)
	}
}

func TestFromConfigAcceptsHarmlessLinuxFields(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*runtime.PodSandboxConfig)
	}{
		{"no linux section", func(c *runtime.PodSandboxConfig) { c.Linux = nil }},
		{"empty linux section", func(c *runtime.PodSandboxConfig) { c.Linux = &runtime.LinuxPodSandboxConfig{} }},
		{"empty security context", func(c *runtime.PodSandboxConfig) { c.Linux.SecurityContext = &runtime.LinuxSandboxSecurityContext{} }},
		{"no namespace options", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions = nil }},
		{"all namespace modes zero (POD)", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions = &runtime.NamespaceOption{} }},
		{"ipc CONTAINER", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.Ipc = runtime.NamespaceMode_CONTAINER }},
		{"userns NODE", func(c *runtime.PodSandboxConfig) {
			secCtx(c).NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_NODE}
		}},
		{"cgroup parent", func(c *runtime.PodSandboxConfig) { c.Linux.CgroupParent = "/kubepods/burstable/pod0b1c2d3e" }},
		{"nil sysctls", func(c *runtime.PodSandboxConfig) { c.Linux.Sysctls = nil }},
		{"empty SELinux options", func(c *runtime.PodSandboxConfig) { secCtx(c).SelinuxOptions = &runtime.SELinuxOption{} }},
		{"seccomp Unconfined", func(c *runtime.PodSandboxConfig) {
			secCtx(c).Seccomp = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Unconfined}
		}},
		{"no seccomp", func(c *runtime.PodSandboxConfig) { secCtx(c).Seccomp = nil }},
		{"seccomp profile path runtime/default", func(c *runtime.PodSandboxConfig) { secCtx(c).SeccompProfilePath = "runtime/default" }},
		{"apparmor RuntimeDefault", func(c *runtime.PodSandboxConfig) {
			secCtx(c).Apparmor = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_RuntimeDefault}
		}},
		{"privileged false, empty groups", func(c *runtime.PodSandboxConfig) {
			secCtx(c).Privileged = false
			secCtx(c).SupplementalGroups = []int64{}
		}},
		{"no windows section", func(c *runtime.PodSandboxConfig) { c.Windows = nil }},
		{"empty windows security context", func(c *runtime.PodSandboxConfig) {
			c.Windows.SecurityContext = &runtime.WindowsSandboxSecurityContext{}
		}},
		{"windows namespace options POD", func(c *runtime.PodSandboxConfig) {
			c.Windows.SecurityContext.NamespaceOptions = &runtime.WindowsNamespaceOption{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(tc.mutate))
			if err != nil {
				t.Fatal(err)
			}
			if pod.Network.HostNetwork {
				t.Fatal("HostNetwork set")
			}
		})
	}
}

func TestResources(t *testing.T) {
	pod, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) {
		c.Linux.Overhead = &runtime.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 25000, CpuShares: 256, MemoryLimitInBytes: 128 << 20}
		c.Linux.Resources = &runtime.LinuxContainerResources{CpuShares: 1024, MemoryLimitInBytes: 1 << 30, OomScoreAdj: -997, HugepageLimits: []*runtime.HugepageLimit{{PageSize: "2MB", Limit: 0}}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Resources{
		Overhead: &Limits{CPUShares: 256, CPUQuota: 25000, CPUPeriod: 100000, MemoryLimitBytes: 128 << 20},
		Total:    &Limits{CPUShares: 1024, MemoryLimitBytes: 1 << 30},
	}
	if !reflect.DeepEqual(pod.Resources, want) {
		t.Fatalf("Resources = %+v / %+v, want %+v / %+v", pod.Resources.Overhead, pod.Resources.Total, want.Overhead, want.Total)
	}

	// Empty resources and unlimited quota (-1) are accepted; empty ones
	// are not recorded.
	pod, err = FromConfig(withConfig(func(c *runtime.PodSandboxConfig) {
		c.Linux.Overhead = &runtime.LinuxContainerResources{}
		c.Linux.Resources = &runtime.LinuxContainerResources{CpuQuota: -1}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if pod.Resources.Overhead != nil || pod.Resources.Total == nil || pod.Resources.Total.CPUQuota != -1 {
		t.Fatalf("Resources = %+v / %+v", pod.Resources.Overhead, pod.Resources.Total)
	}
}
