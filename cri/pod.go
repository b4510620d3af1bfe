package cri

import (
	"fmt"
	"maps"
	"regexp"
	"strings"

	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Pod is a pod's settings, taken from its CRI PodSandboxConfig and
// validated for a Windows process-isolated pod. It is JSON-friendly: its
// JSON is what verbose SandboxStatus shows under the "winproc" key.
type Pod struct {
	// Name, Namespace, UID and Attempt are the pod's CRI metadata.
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	UID       string `json:"uid,omitempty"`
	Attempt   uint32 `json:"attempt"`

	// Hostname is the computer name of the pod's compute systems.
	Hostname string `json:"hostname"`
	// HostnameDefaulted says the config had no hostname and Hostname was
	// made from the pod name.
	HostnameDefaulted bool `json:"hostnameDefaulted,omitempty"`

	// LogDirectory is the host directory of the pod's container logs, as
	// the kubelet gave it ("" when none).
	LogDirectory string `json:"logDirectory,omitempty"`

	DNS     DNS     `json:"dns"`
	Network Network `json:"network"`

	// RunAsUserName is the pod's default user for its containers
	// (spec.securityContext.windowsOptions.runAsUserName); "" keeps the
	// image's user.
	RunAsUserName string `json:"runAsUserName,omitempty"`
	// GMSA is the pod's group managed service account; nil for none.
	GMSA *GMSA `json:"gmsa,omitempty"`
	// HostProcess is the pod's HostProcess flag: its containers are
	// HostProcess containers, processes on the host in job objects, with
	// the host's network and no pause silo.
	HostProcess bool `json:"hostProcess"`

	Resources Resources `json:"resources"`

	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`

	// Config is the PodSandboxConfig the settings came from (a copy the
	// Pod owns).
	Config *runtime.PodSandboxConfig `json:"-"`
}

// DNS is the pod's name resolution.
type DNS struct {
	// Servers are the DNS server addresses, in order.
	Servers []string `json:"servers,omitempty"`
	// Searches are the DNS suffix search list, in order.
	Searches []string `json:"searches,omitempty"`
	// IgnoredOptions are the config's resolv.conf options (ndots:5, ...):
	// Windows' resolver has no such options, so they are recorded only.
	IgnoredOptions []string `json:"ignoredOptions,omitempty"`
}

// Network is the pod's networking.
type Network struct {
	// Namespace is CreateSandboxRequest.netns_path: the GUID of the HCN
	// namespace containerd created and ran CNI in (Windows), or a network
	// namespace path (containerd on Linux, for the emulation); "" when the
	// pod has none.
	Namespace string `json:"namespace,omitempty"`
	// HostNetwork says the config asked for the host's network
	// (spec.hostNetwork). The network the pod gets is Namespace's.
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// PortMappings are the pod's container ports, with the host ports HNS
	// forwards to them (through CNI).
	PortMappings []PortMapping `json:"portMappings,omitempty"`
}

// PortMapping is one container port of the pod.
type PortMapping struct {
	// Protocol is "TCP", "UDP" or "SCTP".
	Protocol      string `json:"protocol"`
	ContainerPort int32  `json:"containerPort"`
	// HostPort is the host port forwarded to ContainerPort; 0 for none.
	HostPort int32 `json:"hostPort,omitempty"`
	// HostIP is the host address HostPort is bound on; "" for all.
	HostIP string `json:"hostIP,omitempty"`
}

// GMSA is a group managed service account identity.
type GMSA struct {
	// CredentialSpec is the credential spec, a JSON object as text, for
	// the compute systems. It is left out of the status JSON (the "info"
	// key's config carries it already).
	CredentialSpec string `json:"-"`
	// Account is DomainJoinConfig.MachineAccountName.
	Account string `json:"account"`
	// Domain is DomainJoinConfig.DnsName.
	Domain string `json:"domain,omitempty"`
}

// Resources are the pod-level resources the config reports.
type Resources struct {
	// Overhead is the RuntimeClass overhead (linux.overhead).
	Overhead *Limits `json:"overhead,omitempty"`
	// Total is the sum of the containers' resources (linux.resources).
	Total *Limits `json:"total,omitempty"`
}

// Limits are CPU and memory figures; 0 is not set.
type Limits struct {
	CPUShares        int64 `json:"cpuShares,omitempty"`
	CPUQuota         int64 `json:"cpuQuota,omitempty"`
	CPUPeriod        int64 `json:"cpuPeriod,omitempty"`
	MemoryLimitBytes int64 `json:"memoryLimitBytes,omitempty"`
}

// FromCreateSandbox is Decode, FromConfig and SetNetworkNamespace for a
// CreateSandboxRequest's options and netns_path.
func FromCreateSandbox(options typeurl.Any, netnsPath string) (*Pod, error) {
	cfg, err := Decode(options)
	if err != nil {
		return nil, err
	}
	p, err := FromConfig(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.SetNetworkNamespace(netnsPath); err != nil {
		return nil, err
	}
	return p, nil
}

// FromConfig validates a PodSandboxConfig for a Windows pod, process
// isolated or HostProcess, and returns its settings. Anything wrong is one
// errdefs.ErrInvalidArgument error listing every problem, each naming the
// pod spec field and the fix.
func FromConfig(cfg *runtime.PodSandboxConfig) (*Pod, error) {
	if cfg == nil {
		return nil, invalid("no PodSandboxConfig")
	}
	md := cfg.GetMetadata()
	if md == nil {
		return nil, invalid("the PodSandboxConfig has no metadata: a pod needs metadata.name (and namespace, uid)")
	}
	if md.GetName() == "" {
		return nil, invalid("the PodSandboxConfig's metadata.name is empty: a pod needs a name")
	}
	pod := &Pod{
		Name:         md.GetName(),
		Namespace:    md.GetNamespace(),
		UID:          md.GetUid(),
		Attempt:      md.GetAttempt(),
		LogDirectory: cfg.GetLogDirectory(),
		Labels:       maps.Clone(cfg.GetLabels()),
		Annotations:  maps.Clone(cfg.GetAnnotations()),
		Config:       proto.Clone(cfg).(*runtime.PodSandboxConfig),
	}

	wsc := cfg.GetWindows().GetSecurityContext()
	pod.HostProcess = wsc.GetHostProcess()

	var p problems
	pod.Network.HostNetwork = checkLinux(cfg.GetLinux(), &p)
	pod.Resources = resourcesFrom(cfg.GetLinux(), &p)
	if checkWindowsNamespaces(wsc.GetNamespaceOptions(), &p) {
		pod.Network.HostNetwork = true
	}
	if pod.HostProcess {
		checkHostProcess(cfg, pod, &p)
	} else {
		pod.Hostname, pod.HostnameDefaulted = hostnameFrom(cfg.GetHostname(), pod.Name, &p)
	}
	pod.DNS = dnsFrom(cfg.GetDnsConfig(), &p)
	pod.Network.PortMappings = portMappingsFrom(cfg.GetPortMappings(), &p)
	pod.RunAsUserName = runAsUserNameFrom(wsc.GetRunAsUsername(), &p)
	pod.GMSA = gmsaFrom(wsc.GetCredentialSpec(), &p)

	if err := p.err(pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// guidPattern is an HCN namespace id, with or without braces.
var guidPattern = regexp.MustCompile(`^(\{[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\}|[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12})$`)

// SetNetworkNamespace records CreateSandboxRequest.netns_path: "" (no
// namespace of its own), an HCN namespace GUID (containerd on Windows) or
// an absolute path (containerd on Linux). Anything else is
// errdefs.ErrInvalidArgument.
func (p *Pod) SetNetworkNamespace(netnsPath string) error {
	switch {
	case netnsPath == "", guidPattern.MatchString(netnsPath), strings.HasPrefix(netnsPath, "/"):
		p.Network.Namespace = netnsPath
		return nil
	}
	return invalid("pod %s: the sandbox's netns_path %q is neither an HCN namespace GUID (what containerd on Windows sends) nor an absolute network namespace path", p.ref(), netnsPath)
}

// ref names the pod in messages: namespace/name.
func (p *Pod) ref() string {
	if p.Namespace == "" {
		return fmt.Sprintf("%q", p.Name)
	}
	return fmt.Sprintf("%q", p.Namespace+"/"+p.Name)
}

// problems collects everything wrong with a config, to report at once.
type problems []string

func (p *problems) add(format string, a ...any) {
	*p = append(*p, fmt.Sprintf(format, a...))
}

func (p problems) err(pod *Pod) error {
	if len(p) == 0 {
		return nil
	}
	kind := "a Windows process-isolated pod"
	if pod.HostProcess {
		kind = "a Windows HostProcess pod"
	}
	return invalid("pod %s cannot run as %s: %s", pod.ref(), kind, strings.Join(p, "; "))
}

// checkHostProcess holds a HostProcess pod to what the kubelet requires of
// one: the host's network, and no identity but a host account. Its
// containers run on the host, so the pod has no hostname of its own (the
// node's is theirs), and its DNS settings and port mappings, which the
// host's network does not take, are recorded only.
func checkHostProcess(cfg *runtime.PodSandboxConfig, pod *Pod, p *problems) {
	if !pod.Network.HostNetwork {
		p.add("a HostProcess pod runs in the host's network: set spec.hostNetwork: true (CRI linux.security_context.namespace_options.network NODE)")
	}
	if cfg.GetWindows().GetSecurityContext().GetCredentialSpec() != "" {
		p.add("spec.securityContext.windowsOptions.gmsaCredentialSpec (CRI windows.security_context.credential_spec) does not apply to a HostProcess pod, whose processes run as host accounts: remove it, or run the pod as a process-isolated pod")
	}
}
