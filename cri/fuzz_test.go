package cri

import (
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/winproc/winproc/internal/validation"
)

// sandboxSeeds are FuzzFromCreateSandbox's pod configs: the kubelet's, bare
// ones, and ones with fields winproc takes, ignores or refuses.
func sandboxSeeds() []*runtime.PodSandboxConfig {
	return []*runtime.PodSandboxConfig{
		kubeletWindowsConfig(),
		{Metadata: &runtime.PodSandboxMetadata{Name: "bare"}},
		{Metadata: &runtime.PodSandboxMetadata{Namespace: "shop"}},
		{Hostname: "web"},
		withConfig(func(c *runtime.PodSandboxConfig) {
			c.Hostname = ""
			secCtx(c).NamespaceOptions.Network = runtime.NamespaceMode_NODE
			c.Windows.SecurityContext.HostProcess = true
		}),
		withConfig(func(c *runtime.PodSandboxConfig) {
			secCtx(c).NamespaceOptions.Pid = runtime.NamespaceMode_NODE
			secCtx(c).NamespaceOptions.UsernsOptions = &runtime.UserNamespace{Mode: runtime.NamespaceMode_POD}
			secCtx(c).SelinuxOptions = &runtime.SELinuxOption{Level: "s0:c123,c456"}
			secCtx(c).RunAsUser = &runtime.Int64Value{Value: 1000}
			secCtx(c).Seccomp = &runtime.SecurityProfile{ProfileType: runtime.SecurityProfile_Localhost, LocalhostRef: "audit.json"}
			c.Linux.Sysctls = map[string]string{"net.ipv4.ip_forward": "1"}
			c.Hostname = "bad_host"
			c.DnsConfig.Servers = []string{"dns.example"}
		}),
		withConfig(func(c *runtime.PodSandboxConfig) {
			c.Linux = &runtime.LinuxPodSandboxConfig{
				Overhead:  &runtime.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 25000, CpuShares: 256, MemoryLimitInBytes: 128 << 20},
				Resources: &runtime.LinuxContainerResources{CpuQuota: -1, MemoryLimitInBytes: 1 << 30},
			}
			c.Windows.SecurityContext.NamespaceOptions = &runtime.WindowsNamespaceOption{Network: runtime.NamespaceMode_NODE}
		}),
		withConfig(func(c *runtime.PodSandboxConfig) {
			c.PortMappings = []*runtime.PortMapping{
				{Protocol: runtime.Protocol_SCTP, ContainerPort: 9999},
				{Protocol: runtime.Protocol_TCP, ContainerPort: 443, HostPort: 8443, HostIp: "fd00::1"},
				{Protocol: 7, ContainerPort: 70000, HostPort: -1, HostIp: "localhost"},
			}
			c.DnsConfig = &runtime.DNSConfig{Servers: []string{"fd00::a"}, Searches: []string{"a.local b.local"}}
		}),
		withConfig(func(c *runtime.PodSandboxConfig) {
			c.Hostname = ""
			c.Metadata.Name = strings.Repeat("a", 62) + "-xyz"
			c.Windows.SecurityContext.RunAsUsername = `NT AUTHORITY\NETWORK SERVICE`
			c.Windows.SecurityContext.CredentialSpec = `{"domainJoinConfig":{"machineAccountName":"svc1"}}`
		}),
		withConfig(func(c *runtime.PodSandboxConfig) {
			c.Windows.SecurityContext.RunAsUsername = `a\b\c`
			c.Windows.SecurityContext.CredentialSpec = `{"DomainJoinConfig":"contoso"}`
		}),
	}
}

// FuzzFromCreateSandbox feeds fuzzed CreateSandboxRequest options (type URL
// and protobuf bytes) and netns_path through FromCreateSandbox, the path a
// sandbox's settings take from containerd into the shim. Every refusal must
// be errdefs.ErrInvalidArgument;
// a decoded config must re-encode to itself; an accepted pod must satisfy
// what FromConfig promises of it and encode as the verbose status.
func FuzzFromCreateSandbox(f *testing.F) {
	for i, cfg := range sandboxSeeds() {
		value, err := proto.Marshal(cfg)
		if err != nil {
			f.Fatal(err)
		}
		netns := []string{"", "5f2a1b9e-3c44-4d7a-9a0e-0123456789ab", "/var/run/netns/cni-1", "{5F2A1B9E-3C44-4D7A-9A0E-0123456789AB}", "cni-1234"}[i%5]
		f.Add(ConfigTypeURL, value, netns)
	}
	value, err := proto.Marshal(kubeletWindowsConfig())
	if err != nil {
		f.Fatal(err)
	}
	// The options of TestDecode.
	f.Add("type.googleapis.com/"+ConfigTypeURL, value, "")
	f.Add("runtime.v1alpha2.PodSandboxConfig", value, "")
	f.Add("x.runtime.v1.PodSandboxConfig", value, "")
	f.Add("", value, "")
	f.Add("", []byte(nil), "")
	f.Add(ConfigTypeURL, []byte(nil), "")
	f.Add(ConfigTypeURL, []byte("\xff\xff\xff\xff garbage"), "")
	f.Add(ConfigTypeURL, value[:len(value)-3], "")
	f.Add(ConfigTypeURL, []byte(`{"metadata":{"name":"web"}}`), "")

	f.Fuzz(checkFromCreateSandbox)
}

// checkFromCreateSandbox checks Decode and FromCreateSandbox on one input:
// refusals are InvalidArgument alone and the same from both; what Decode
// accepts round-trips, and an accepted pod keeps its config (checkPod).
func checkFromCreateSandbox(t *testing.T, typeURL string, value []byte, netns string) {
	options := &anypb.Any{TypeUrl: typeURL, Value: value}
	cfg, decErr := Decode(options)
	pod, err := FromCreateSandbox(options, netns)
	if decErr != nil {
		if !errdefs.IsInvalidArgument(decErr) || cfg != nil {
			t.Fatalf("Decode = %v, %v; want only an invalid argument error", cfg, decErr)
		}
		if err == nil || err.Error() != decErr.Error() {
			t.Fatalf("FromCreateSandbox = %v, Decode = %v", err, decErr)
		}
		return
	}
	// What Decode accepts is the protobuf it was given: it encodes
	// back to a message that decodes equal.
	b, merr := proto.MarshalOptions{Deterministic: true}.Marshal(cfg)
	if merr != nil {
		t.Fatalf("re-encoding a decoded config: %v", merr)
	}
	back := &runtime.PodSandboxConfig{}
	if uerr := proto.Unmarshal(b, back); uerr != nil || !proto.Equal(back, cfg) {
		t.Fatalf("decoded config does not round-trip: %v", uerr)
	}
	if err != nil {
		switch {
		case pod != nil:
			t.Fatalf("FromCreateSandbox returned a pod with its error %v", err)
		case !errdefs.IsInvalidArgument(err):
			t.Fatalf("unclassified error: %v", err)
		}
		return
	}
	checkPod(t, cfg, pod, netns)
}

// checkPod checks an accepted pod against its config.
func checkPod(t *testing.T, cfg *runtime.PodSandboxConfig, pod *Pod, netns string) {
	t.Helper()
	md := cfg.GetMetadata()
	switch {
	case pod.Name == "" || pod.Name != md.GetName() || pod.Namespace != md.GetNamespace() || pod.UID != md.GetUid() || pod.Attempt != md.GetAttempt():
		t.Fatalf("pod %q/%q does not carry the metadata %v", pod.Namespace, pod.Name, md)
	case pod.Config == cfg || !proto.Equal(pod.Config, cfg):
		t.Fatal("pod.Config is not a copy of the config")
	case pod.Network.Namespace != netns:
		t.Fatalf("network namespace %q, want %q", pod.Network.Namespace, netns)
	case pod.HostProcess != cfg.GetWindows().GetSecurityContext().GetHostProcess():
		t.Fatal("the pod's HostProcess flag is not the config's")
	case pod.HostProcess && (!pod.Network.HostNetwork || pod.Hostname != "" || pod.GMSA != nil):
		t.Fatalf("a HostProcess pod without the host's network, or with a hostname or gMSA: %+v", pod)
	}

	checkPodNetwork(t, cfg, pod)
	checkPodAccountAndLimits(t, cfg, pod)

	// The pod is the verbose status: both keys are JSON objects.
	info, err := VerboseInfo(pod, RuntimeStatus{Pid: 1, ProcessStatus: "running"})
	if err != nil {
		t.Fatalf("VerboseInfo: %v", err)
	}
	for k, v := range info {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(v), &obj); err != nil || obj == nil {
			t.Fatalf("VerboseInfo[%q] is not a JSON object: %v", k, err)
		}
	}
	var back Pod
	if err := json.Unmarshal([]byte(info[PodInfoKey]), &back); err != nil || back.Name != pod.Name || back.Hostname != pod.Hostname {
		t.Fatalf("the pod's status JSON does not decode to it: %+v, %v", back, err)
	}
	// The pod and its config are independent: editing one leaves the other.
	if cfg.GetMetadata() != nil {
		name := cfg.Metadata.Name
		cfg.Metadata.Name += "-changed"
		if pod.Config.GetMetadata().GetName() != name || pod.Name != name {
			t.Fatal("the pod shares the config's metadata")
		}
		cfg.Metadata.Name = name
	}
}

// checkPodNetwork checks an accepted pod's network, hostname and DNS
// against its config.
func checkPodNetwork(t *testing.T, cfg *runtime.PodSandboxConfig, pod *Pod) {
	t.Helper()
	hostNetwork := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtime.NamespaceMode_NODE ||
		cfg.GetWindows().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtime.NamespaceMode_NODE
	if pod.Network.HostNetwork != hostNetwork {
		t.Fatalf("HostNetwork = %v, want %v", pod.Network.HostNetwork, hostNetwork)
	}

	// The hostname is usable: given and valid, or made from the name.
	if pod.HostnameDefaulted != (cfg.GetHostname() == "") {
		t.Fatalf("HostnameDefaulted = %v for hostname %q", pod.HostnameDefaulted, cfg.GetHostname())
	}
	if !pod.HostnameDefaulted && pod.Hostname != cfg.GetHostname() {
		t.Fatalf("hostname %q, config has %q", pod.Hostname, cfg.GetHostname())
	}
	if pod.HostnameDefaulted && !strings.HasPrefix(pod.Name, pod.Hostname) {
		t.Fatalf("hostname %q is not cut from the pod name %q", pod.Hostname, pod.Name)
	}
	if why := hostnameProblem(pod.Hostname); why != "" || pod.Hostname == "" || len(pod.Hostname) > maxHostname {
		t.Fatalf("accepted hostname %q: %s", pod.Hostname, why)
	}

	for _, s := range pod.DNS.Servers {
		if _, err := netip.ParseAddr(s); err != nil {
			t.Fatalf("accepted DNS server %q", s)
		}
	}
	for _, s := range pod.DNS.Searches {
		if s == "" || strings.ContainsAny(s, ", \t\n") {
			t.Fatalf("accepted DNS search domain %q", s)
		}
	}
	if !slices.Equal(pod.DNS.Servers, cfg.GetDnsConfig().GetServers()) || !slices.Equal(pod.DNS.Searches, cfg.GetDnsConfig().GetSearches()) ||
		!slices.Equal(pod.DNS.IgnoredOptions, cfg.GetDnsConfig().GetOptions()) {
		t.Fatalf("DNS %+v does not match the config's %v", pod.DNS, cfg.GetDnsConfig())
	}

	if len(pod.Network.PortMappings) != len(cfg.GetPortMappings()) {
		t.Fatalf("%d port mappings for %d in the config", len(pod.Network.PortMappings), len(cfg.GetPortMappings()))
	}
	for _, pm := range pod.Network.PortMappings {
		switch {
		case pm.Protocol != "TCP" && pm.Protocol != "UDP" && pm.Protocol != "SCTP":
			t.Fatalf("accepted protocol %q", pm.Protocol)
		case pm.ContainerPort < 0 || pm.ContainerPort > 65535 || pm.HostPort < 0 || pm.HostPort > 65535:
			t.Fatalf("accepted ports %+v", pm)
		case pm.HostPort > 0 && (pm.ContainerPort == 0 || pm.Protocol == "SCTP"):
			t.Fatalf("accepted host port forwarding %+v", pm)
		}
		if pm.HostIP != "" {
			if _, err := netip.ParseAddr(pm.HostIP); err != nil {
				t.Fatalf("accepted host IP %q", pm.HostIP)
			}
		}
	}
}

// checkPodAccountAndLimits checks an accepted pod's account, gMSA and
// resource limits against its config.
func checkPodAccountAndLimits(t *testing.T, cfg *runtime.PodSandboxConfig, pod *Pod) {
	t.Helper()
	wsc := cfg.GetWindows().GetSecurityContext()
	if pod.RunAsUserName != wsc.GetRunAsUsername() {
		t.Fatalf("RunAsUserName %q, config has %q", pod.RunAsUserName, wsc.GetRunAsUsername())
	}
	if pod.RunAsUserName != "" && validation.UserName(pod.RunAsUserName) != "" {
		t.Fatalf("accepted user name %q", pod.RunAsUserName)
	}
	if (pod.GMSA != nil) != (wsc.GetCredentialSpec() != "") {
		t.Fatalf("GMSA %+v for credential spec %q", pod.GMSA, wsc.GetCredentialSpec())
	}
	if g := pod.GMSA; g != nil && (g.Account == "" || g.CredentialSpec != wsc.GetCredentialSpec() || !json.Valid([]byte(g.CredentialSpec))) {
		t.Fatalf("GMSA %+v", g)
	}

	for _, l := range []*Limits{pod.Resources.Overhead, pod.Resources.Total} {
		if l != nil && (*l == Limits{} || l.CPUShares < 0 || l.CPUQuota < -1 || l.CPUPeriod < 0 || l.MemoryLimitBytes < 0) {
			t.Fatalf("accepted limits %+v", *l)
		}
	}
}
