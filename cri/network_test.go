package cri

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
			pod := fromConfig(t, cfg, tc.wantErr)
			if pod == nil {
				return
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
			pod := fromConfig(t, withConfig(func(c *runtime.PodSandboxConfig) { c.DnsConfig = tc.dns }), tc.wantErr)
			if pod == nil {
				return
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
			pod := fromConfig(t, withConfig(func(c *runtime.PodSandboxConfig) { c.PortMappings = tc.pms }), tc.wantErr)
			if pod == nil {
				return
			}
			if !reflect.DeepEqual(pod.Network.PortMappings, tc.want) {
				t.Fatalf("PortMappings = %+v, want %+v", pod.Network.PortMappings, tc.want)
			}
		})
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
