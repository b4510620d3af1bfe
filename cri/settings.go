package cri

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"unicode"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/winproc/winproc/internal/validation"
)

const (
	// maxHostnameLabel is a DNS label's limit, and the kubelet's limit on
	// a hostname made from the pod name.
	maxHostnameLabel = 63
	// maxHostname is the kubelet's limit on a hostname (setHostnameAsFQDN
	// makes hostname.domain up to 64 characters).
	maxHostname = 64
)

var hostnameLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)

// hostnameFrom is the config's hostname, or the pod name cut as the
// kubelet cuts it when there is none.
func hostnameFrom(hostname, podName string, p *problems) (string, bool) {
	if hostname != "" {
		if why := hostnameProblem(hostname); why != "" {
			p.add("hostname %q (spec.hostname, CRI hostname) %s", hostname, why)
		}
		return hostname, false
	}
	h := podName
	if len(h) > maxHostnameLabel {
		h = strings.TrimRight(h[:maxHostnameLabel], "-.")
	}
	if why := hostnameProblem(h); why != "" {
		p.add("the config has no hostname and the pod name %q cannot be one (%s): set the CRI hostname", podName, why)
	}
	return h, true
}

// hostnameProblem says what is wrong with a host name, "" if nothing.
func hostnameProblem(h string) string {
	if len(h) > maxHostname {
		return fmt.Sprintf("is %d characters long, more than %d", len(h), maxHostname)
	}
	for l := range strings.SplitSeq(h, ".") {
		if l == "" {
			return "has an empty label: write DNS labels joined by single dots, such as web-0"
		}
		if len(l) > maxHostnameLabel || !hostnameLabel.MatchString(l) {
			return fmt.Sprintf("has the label %q, which is not a DNS label (letters, digits and '-', at most %d, not starting or ending with '-')", l, maxHostnameLabel)
		}
	}
	return ""
}

// dnsFrom checks the servers and search list, and keeps the options
// aside: Windows' resolver has no resolv.conf options.
func dnsFrom(d *runtime.DNSConfig, p *problems) DNS {
	if d == nil {
		return DNS{}
	}
	for i, s := range d.GetServers() {
		if _, err := netip.ParseAddr(s); err != nil {
			p.add("DNS server %q (CRI dns_config.servers[%d], from the kubelet's clusterDNS or spec.dnsConfig.nameservers) is not an IP address", s, i)
		}
	}
	for i, s := range d.GetSearches() {
		if s == "" || len(s) > 253 || strings.ContainsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			p.add("DNS search domain %q (CRI dns_config.searches[%d], from spec.dnsConfig.searches or the node's search list) must be one domain name, such as svc.cluster.local, without spaces or commas", s, i)
		}
	}
	return DNS{
		Servers:        slices.Clone(d.GetServers()),
		Searches:       slices.Clone(d.GetSearches()),
		IgnoredOptions: slices.Clone(d.GetOptions()),
	}
}

// portMappingsFrom records the port mappings, refusing ports out of range,
// bad host IPs and SCTP host ports.
func portMappingsFrom(pms []*runtime.PortMapping, p *problems) []PortMapping {
	var out []PortMapping
	for i, m := range pms {
		where := fmt.Sprintf("port mapping %d (spec.containers[*].ports[*], CRI port_mappings[%d])", i, i)
		if m == nil {
			p.add("%s is empty", where)
			continue
		}
		pm := PortMapping{ContainerPort: m.GetContainerPort(), HostPort: m.GetHostPort(), HostIP: m.GetHostIp()}
		switch m.GetProtocol() {
		case runtime.Protocol_TCP, runtime.Protocol_UDP, runtime.Protocol_SCTP:
			pm.Protocol = m.GetProtocol().String()
		default:
			p.add("%s has the unknown protocol %d: use TCP or UDP", where, int32(m.GetProtocol()))
		}
		if pm.ContainerPort < 0 || pm.ContainerPort > 65535 {
			p.add("%s has containerPort %d, outside 1-65535", where, pm.ContainerPort)
		} else if pm.ContainerPort == 0 && pm.HostPort > 0 {
			p.add("%s forwards hostPort %d to no containerPort: set containerPort", where, pm.HostPort)
		}
		if pm.HostPort < 0 || pm.HostPort > 65535 {
			p.add("%s has hostPort %d, outside 1-65535 (0 for none)", where, pm.HostPort)
		}
		if pm.HostIP != "" {
			if _, err := netip.ParseAddr(pm.HostIP); err != nil {
				p.add("%s has hostIP %q, which is not an IP address", where, pm.HostIP)
			}
		}
		if m.GetProtocol() == runtime.Protocol_SCTP && pm.HostPort > 0 {
			p.add("%s forwards SCTP hostPort %d: Windows' HNS forwards TCP and UDP host ports only (use TCP or UDP, or drop hostPort)", where, pm.HostPort)
		}
		out = append(out, pm)
	}
	return out
}

// runAsUserNameFrom checks the user name as the API server does for
// spec.securityContext.windowsOptions.runAsUserName.
func runAsUserNameFrom(u string, p *problems) string {
	if u == "" {
		return ""
	}
	if why := validation.UserName(u); why != "" {
		p.add("spec.securityContext.windowsOptions.runAsUserName %q (CRI windows.security_context.run_as_username) %s", u, why)
	}
	return u
}

// credentialSpec is the part of a gMSA credential spec winproc reads.
type credentialSpec struct {
	DomainJoinConfig *struct {
		MachineAccountName string
		DNSName            string `json:"DnsName"`
	}
}

// gmsaFrom checks the credential spec: a JSON object naming the account
// in DomainJoinConfig, as New-CredentialSpec writes it.
func gmsaFrom(cs string, p *problems) *GMSA {
	if cs == "" {
		return nil
	}
	const field = "spec.securityContext.windowsOptions.gmsaCredentialSpec (CRI windows.security_context.credential_spec)"
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(cs), &obj); err != nil || obj == nil {
		why := "null"
		if err != nil {
			why = err.Error()
		}
		p.add("%s is not a JSON object (%s): give the credential spec's JSON content, as New-CredentialSpec writes it or the GMSACredentialSpec resource holds it", field, why)
		return nil
	}
	var spec credentialSpec
	if err := json.Unmarshal([]byte(cs), &spec); err != nil {
		p.add("%s has a DomainJoinConfig that is not an object with string fields (%v)", field, err)
		return nil
	}
	if spec.DomainJoinConfig == nil || spec.DomainJoinConfig.MachineAccountName == "" {
		p.add("%s has no DomainJoinConfig.MachineAccountName: it is not a gMSA credential spec (generate one with New-CredentialSpec)", field)
		return nil
	}
	return &GMSA{
		CredentialSpec: cs,
		Account:        spec.DomainJoinConfig.MachineAccountName,
		Domain:         spec.DomainJoinConfig.DNSName,
	}
}
