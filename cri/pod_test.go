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

func TestHostNetwork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*runtime.PodSandboxConfig)
		want   bool
	}{
		{"pod network", func(*runtime.PodSandboxConfig) {}, false},
		{"linux NODE (spec.hostNetwork)", func(c *runtime.PodSandboxConfig) {
			secCtx(c).NamespaceOptions.Network = runtime.NamespaceMode_NODE
			c.Hostname = "" // the kubelet sends none for hostNetwork pods
		}, true},
		{"windows NODE", func(c *runtime.PodSandboxConfig) {
			c.Windows.SecurityContext.NamespaceOptions = &runtime.WindowsNamespaceOption{Network: runtime.NamespaceMode_NODE}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(tc.mutate))
			if err != nil {
				t.Fatal(err)
			}
			if pod.Network.HostNetwork != tc.want {
				t.Fatalf("HostNetwork = %v, want %v", pod.Network.HostNetwork, tc.want)
			}
			if pod.Hostname != "web-0" {
				t.Fatalf("Hostname = %q", pod.Hostname)
			}
		})
	}
}

func TestHostname(t *testing.T) {
	long := strings.Repeat("a", 60) + "-bcdef" // 66 characters, cut at 63 after "-bc"
	dashAt63 := strings.Repeat("a", 62) + "-xyz"
	for _, tc := range []struct {
		name, hostname, podName string
		want                    string // "" = refused
		defaulted               bool
		wantErr                 string
	}{
		{"given", "web-0", "ignored", "web-0", false, ""},
		{"given, upper case", "Web-0", "web-0", "Web-0", false, ""},
		{"given FQDN of 64", strings.Repeat("a", 49) + ".shop.svc.local", "p", strings.Repeat("a", 49) + ".shop.svc.local", false, ""},
		{"defaults to the pod name", "", "web-0", "web-0", true, ""},
		{"default keeps dots", "", "web.v1", "web.v1", true, ""},
		{"default cut to 63", "", long, long[:63], true, ""},
		{"default cut drops trailing dash", "", dashAt63, strings.Repeat("a", 62), true, ""},
		{"given too long", strings.Repeat("a", 40) + "." + strings.Repeat("b", 30), "p", "", false, "more than 64"},
		{"given label too long", strings.Repeat("a", 64), "p", "", false, "not a DNS label"},
		{"underscore", "web_0", "p", "", false, `label "web_0"`},
		{"leading dash", "-web", "p", "", false, "not a DNS label"},
		{"trailing dash", "web-", "p", "", false, "not a DNS label"},
		{"empty label", "web..shop", "p", "", false, "empty label"},
		{"trailing dot", "web.", "p", "", false, "empty label"},
		{"space", "web 0", "p", "", false, "not a DNS label"},
		{"default from a bad name", "", "my_pod", "", true, `pod name "my_pod" cannot be one`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kubeletWindowsConfig()
			cfg.Hostname = tc.hostname
			cfg.Metadata.Name = tc.podName
			pod, err := FromConfig(cfg)
			if tc.wantErr != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromConfig error = %v, want invalid argument containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.Hostname != tc.want || pod.HostnameDefaulted != tc.defaulted {
				t.Fatalf("Hostname = %q (defaulted %v), want %q (%v)", pod.Hostname, pod.HostnameDefaulted, tc.want, tc.defaulted)
			}
		})
	}
}

func TestDNS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dns     *runtime.DNSConfig
		want    DNS
		wantErr string
	}{
		{"none", nil, DNS{}, ""},
		{"cluster first", &runtime.DNSConfig{
			Servers:  []string{"10.96.0.10", "fd00::a"},
			Searches: []string{"shop.svc.cluster.local", "svc.cluster.local"},
			Options:  []string{"ndots:5", "timeout:2"},
		}, DNS{
			Servers:        []string{"10.96.0.10", "fd00::a"},
			Searches:       []string{"shop.svc.cluster.local", "svc.cluster.local"},
			IgnoredOptions: []string{"ndots:5", "timeout:2"},
		}, ""},
		{"options only", &runtime.DNSConfig{Options: []string{"edns0"}}, DNS{IgnoredOptions: []string{"edns0"}}, ""},
		{"server not an IP", &runtime.DNSConfig{Servers: []string{"10.96.0.10", "dns.local"}},
			DNS{}, `DNS server "dns.local" (CRI dns_config.servers[1]`},
		{"server with port", &runtime.DNSConfig{Servers: []string{"10.96.0.10:53"}}, DNS{}, "is not an IP address"},
		{"search with comma", &runtime.DNSConfig{Searches: []string{"a.local,b.local"}}, DNS{}, "dns_config.searches[0]"},
		{"search with space", &runtime.DNSConfig{Searches: []string{"ok.local", "a.local b.local"}}, DNS{}, "dns_config.searches[1]"},
		{"empty search", &runtime.DNSConfig{Searches: []string{""}}, DNS{}, "one domain name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) { c.DnsConfig = tc.dns }))
			if tc.wantErr != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromConfig error = %v, want invalid argument containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.DNS, tc.want) {
				t.Fatalf("DNS = %+v, want %+v", pod.DNS, tc.want)
			}
		})
	}
}

func TestPortMappings(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pms     []*runtime.PortMapping
		want    []PortMapping
		wantErr string
	}{
		{"none", nil, nil, ""},
		{"recorded", []*runtime.PortMapping{
			{Protocol: runtime.Protocol_TCP, ContainerPort: 8080, HostPort: 80, HostIp: "0.0.0.0"},
			{Protocol: runtime.Protocol_UDP, ContainerPort: 53},
			{Protocol: runtime.Protocol_SCTP, ContainerPort: 9999},
			{Protocol: runtime.Protocol_TCP, ContainerPort: 443, HostPort: 8443, HostIp: "fd00::1"},
		}, []PortMapping{
			{Protocol: "TCP", ContainerPort: 8080, HostPort: 80, HostIP: "0.0.0.0"},
			{Protocol: "UDP", ContainerPort: 53},
			{Protocol: "SCTP", ContainerPort: 9999},
			{Protocol: "TCP", ContainerPort: 443, HostPort: 8443, HostIP: "fd00::1"},
		}, ""},
		{"SCTP host port", []*runtime.PortMapping{{Protocol: runtime.Protocol_SCTP, ContainerPort: 9999, HostPort: 9999}},
			nil, "forwards SCTP hostPort 9999"},
		{"unknown protocol", []*runtime.PortMapping{{Protocol: 7, ContainerPort: 80}}, nil, "unknown protocol 7"},
		{"container port too big", []*runtime.PortMapping{{ContainerPort: 70000}}, nil, "containerPort 70000"},
		{"negative host port", []*runtime.PortMapping{{ContainerPort: 80, HostPort: -1}}, nil, "hostPort -1"},
		{"host port without container port", []*runtime.PortMapping{{HostPort: 80}}, nil, "to no containerPort"},
		{"bad host IP", []*runtime.PortMapping{{ContainerPort: 80, HostPort: 80, HostIp: "localhost"}}, nil, `hostIP "localhost"`},
		{"nil mapping", []*runtime.PortMapping{{ContainerPort: 80}, nil}, nil, "CRI port_mappings[1]) is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) { c.PortMappings = tc.pms }))
			if tc.wantErr != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromConfig error = %v, want invalid argument containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.Network.PortMappings, tc.want) {
				t.Fatalf("PortMappings = %+v, want %+v", pod.Network.PortMappings, tc.want)
			}
		})
	}
}

func TestRunAsUserName(t *testing.T) {
	for _, tc := range []struct {
		user    string
		wantErr string
	}{
		{"", ""},
		{"ContainerUser", ""},
		{"ContainerAdministrator", ""},
		{`NT AUTHORITY\NETWORK SERVICE`, ""},
		{`contoso.com\svc-web`, ""},
		{`CONTOSO\WebApp01$`, ""},
		{`a\b\c`, "more than one backslash"},
		{`\user`, "empty domain"},
		{`CONTOSO\`, "no user name"},
		{"us:er", "cannot contain"},
		{"us@er", "cannot contain"},
		{"...", "only dots and spaces"},
		{"user\x00", "control characters"},
		{strings.Repeat("u", 105), "longer than 104"},
		{strings.Repeat("d", 200) + `\` + strings.Repeat("u", 60), "more than 256"},
		{`CON*TOSO\user`, "neither a NetBIOS nor a DNS domain"},
	} {
		t.Run(tc.user, func(t *testing.T) {
			pod, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) { c.Windows.SecurityContext.RunAsUsername = tc.user }))
			if tc.wantErr != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.wantErr) ||
					!strings.Contains(err.Error(), "spec.securityContext.windowsOptions.runAsUserName") {
					t.Fatalf("FromConfig error = %v, want invalid argument naming runAsUserName and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if pod.RunAsUserName != tc.user {
				t.Fatalf("RunAsUserName = %q, want %q", pod.RunAsUserName, tc.user)
			}
		})
	}
}

func TestGMSA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		spec    string
		want    *GMSA
		wantErr string
	}{
		{"none", "", nil, ""},
		{"credential spec", credSpec, &GMSA{CredentialSpec: credSpec, Account: "WebApp01", Domain: "contoso.com"}, ""},
		{"lower-case keys, no DnsName", `{"domainJoinConfig":{"machineAccountName":"svc1"}}`,
			&GMSA{CredentialSpec: `{"domainJoinConfig":{"machineAccountName":"svc1"}}`, Account: "svc1"}, ""},
		{"not JSON", "WebApp01", nil, "is not a JSON object"},
		{"a JSON array", `[{"DomainJoinConfig":{}}]`, nil, "is not a JSON object"},
		{"a JSON string", `"{}"`, nil, "is not a JSON object"},
		{"null", "null", nil, "is not a JSON object (null)"},
		{"truncated", credSpec[:40], nil, "is not a JSON object"},
		{"empty object", "{}", nil, "no DomainJoinConfig.MachineAccountName"},
		{"no account", `{"DomainJoinConfig":{"DnsName":"contoso.com"}}`, nil, "no DomainJoinConfig.MachineAccountName"},
		{"DomainJoinConfig not an object", `{"DomainJoinConfig":"contoso"}`, nil, "DomainJoinConfig that is not an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, err := FromConfig(withConfig(func(c *runtime.PodSandboxConfig) { c.Windows.SecurityContext.CredentialSpec = tc.spec }))
			if tc.wantErr != "" {
				if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.wantErr) ||
					!strings.Contains(err.Error(), "spec.securityContext.windowsOptions.gmsaCredentialSpec") {
					t.Fatalf("FromConfig error = %v, want invalid argument naming gmsaCredentialSpec and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pod.GMSA, tc.want) {
				t.Fatalf("GMSA = %+v, want %+v", pod.GMSA, tc.want)
			}
		})
	}
}

// kubeletHostProcessConfig is what the kubelet sends for a HostProcess
// pod: hostNetwork, no hostname, HostProcess set, a host account.
func kubeletHostProcessConfig() *runtime.PodSandboxConfig {
	return withConfig(func(c *runtime.PodSandboxConfig) {
		c.Hostname = ""
		secCtx(c).NamespaceOptions.Network = runtime.NamespaceMode_NODE
		c.Windows.SecurityContext = &runtime.WindowsSandboxSecurityContext{HostProcess: true, RunAsUsername: `NT AUTHORITY\SYSTEM`}
	})
}

func TestHostProcessPod(t *testing.T) {
	pod, err := FromConfig(kubeletHostProcessConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !pod.HostProcess || !pod.Network.HostNetwork || pod.Hostname != "" || pod.HostnameDefaulted || pod.RunAsUserName != `NT AUTHORITY\SYSTEM` || pod.GMSA != nil {
		t.Errorf("pod %+v", pod)
	}
	for _, tc := range []struct {
		name   string
		change func(*runtime.PodSandboxConfig)
		want   []string
	}{
		{"pod network", func(c *runtime.PodSandboxConfig) { secCtx(c).NamespaceOptions.Network = runtime.NamespaceMode_POD },
			[]string{"HostProcess pod", "spec.hostNetwork: true"}},
		{"gMSA", func(c *runtime.PodSandboxConfig) { c.Windows.SecurityContext.CredentialSpec = credSpec },
			[]string{"gmsaCredentialSpec", "HostProcess pod"}},
		{"privileged too", func(c *runtime.PodSandboxConfig) { secCtx(c).Privileged = true },
			[]string{"spec.containers[*].securityContext.privileged"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := kubeletHostProcessConfig()
			tc.change(cfg)
			pod, err := FromConfig(cfg)
			if !errdefs.IsInvalidArgument(err) || pod != nil {
				t.Fatalf("FromConfig = %v, %v; want invalid argument", pod, err)
			}
			for _, w := range append(tc.want, `"shop/web-0"`, "Windows HostProcess pod") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
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

func TestSetNetworkNamespace(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"", true},
		{"5f2a1b9e-3c44-4d7a-9a0e-0123456789ab", true},
		{"{5F2A1B9E-3C44-4D7A-9A0E-0123456789AB}", true},
		{"/var/run/netns/cni-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901", true},
		{"5f2a1b9e-3c44-4d7a-9a0e-0123456789a", false},
		{"cni-1234", false},
		{`C:\netns`, false},
	} {
		t.Run(tc.path, func(t *testing.T) {
			pod := &Pod{Name: "web-0", Network: Network{Namespace: "previous"}}
			err := pod.SetNetworkNamespace(tc.path)
			if tc.ok {
				if err != nil || pod.Network.Namespace != tc.path {
					t.Fatalf("SetNetworkNamespace = %v, namespace %q", err, pod.Network.Namespace)
				}
				return
			}
			if !errdefs.IsInvalidArgument(err) || pod.Network.Namespace != "previous" {
				t.Fatalf("SetNetworkNamespace = %v, namespace %q; want invalid argument, unchanged", err, pod.Network.Namespace)
			}
		})
	}
}
