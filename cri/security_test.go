package cri

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
			pod := fromConfig(t, withConfig(func(c *runtime.PodSandboxConfig) { c.Windows.SecurityContext.RunAsUsername = tc.user }), tc.wantErr, "spec.securityContext.windowsOptions.runAsUserName")
			if pod == nil {
				return
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
			pod := fromConfig(t, withConfig(func(c *runtime.PodSandboxConfig) { c.Windows.SecurityContext.CredentialSpec = tc.spec }), tc.wantErr, "spec.securityContext.windowsOptions.gmsaCredentialSpec")
			if pod == nil {
				return
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
