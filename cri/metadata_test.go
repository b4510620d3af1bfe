package cri

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// sandboxMetadata is containerd's versioned sandbox metadata as its CRI
// writes it (internal/cri/store/sandbox.Metadata.MarshalJSON).
func sandboxMetadata(t *testing.T, version string, cfg *runtime.PodSandboxConfig) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"Version":  version,
		"Metadata": map[string]any{"ID": "abc", "Name": "web_default_uid_0", "Config": cfg, "NetNSPath": "", "RuntimeHandler": "winproc"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFromSandboxMetadata(t *testing.T) {
	privileged := &runtime.PodSandboxConfig{
		Metadata: &runtime.PodSandboxMetadata{Name: "web", Namespace: "default"},
		Linux:    &runtime.LinuxPodSandboxConfig{SecurityContext: &runtime.LinuxSandboxSecurityContext{Privileged: true}},
		Windows:  &runtime.WindowsPodSandboxConfig{SecurityContext: &runtime.WindowsSandboxSecurityContext{RunAsUsername: `a\b\c`}},
	}
	cfg, err := FromSandboxMetadata(sandboxMetadata(t, "v1", privileged))
	if err != nil {
		t.Fatal(err)
	}
	// The same refusals as shim mode's, from the same config.
	_, err = FromConfig(cfg)
	if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "privileged") || !strings.Contains(err.Error(), "run_as_username") {
		t.Errorf("FromConfig of the metadata's config = %v", err)
	}
	for _, tc := range []struct {
		name  string
		value []byte
		class func(error) bool
	}{
		{"not JSON", []byte("{"), errdefs.IsInvalidArgument},
		{"another version", sandboxMetadata(t, "v2", privileged), errdefs.IsNotImplemented},
		{"no config", sandboxMetadata(t, "v1", nil), errdefs.IsInvalidArgument},
	} {
		if _, err := FromSandboxMetadata(tc.value); !tc.class(err) || !strings.Contains(err.Error(), SandboxMetadataExtension) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
