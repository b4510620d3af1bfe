package cri

import (
	"strings"
	"testing"

	sandboxapi "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/v2/core/sandbox"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdOptions marshals a config exactly as containerd 2.4's CRI and
// shim sandbox controller do: sandbox.WithOptions(config) into
// CreateOptions, then typeurl.MarshalProto into the request, which then
// crosses the wire.
func containerdOptions(t *testing.T, cfg *runtime.PodSandboxConfig, netns string) *sandboxapi.CreateSandboxRequest {
	t.Helper()
	var co sandbox.CreateOptions
	for _, opt := range []sandbox.CreateOpt{sandbox.WithOptions(cfg), sandbox.WithNetNSPath(netns)} {
		if err := opt(&co); err != nil {
			t.Fatal(err)
		}
	}
	req := &sandboxapi.CreateSandboxRequest{
		SandboxID:   "sb1",
		BundlePath:  "/run/bundle/sb1",
		Options:     typeurl.MarshalProto(co.Options),
		NetnsPath:   co.NetNSPath,
		Annotations: co.Annotations,
	}
	wire, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got := &sandboxapi.CreateSandboxRequest{}
	if err := proto.Unmarshal(wire, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestConfigTypeURLIsWhatContainerdSends(t *testing.T) {
	if ConfigTypeURL != "runtime.v1.PodSandboxConfig" {
		t.Fatalf("ConfigTypeURL = %q", ConfigTypeURL)
	}
	a, err := typeurl.MarshalAny(kubeletWindowsConfig())
	if err != nil {
		t.Fatal(err)
	}
	if a.GetTypeUrl() != ConfigTypeURL {
		t.Fatalf("typeurl.MarshalAny gives %q, Decode expects %q", a.GetTypeUrl(), ConfigTypeURL)
	}
}

func TestDecode(t *testing.T) {
	cfg := kubeletWindowsConfig()
	value, err := proto.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	typeurlAny, err := typeurl.MarshalAny(cfg)
	if err != nil {
		t.Fatal(err)
	}
	prefixed, err := anypb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	other, err := anypb.New(&runtime.ContainerConfig{Metadata: &runtime.ContainerMetadata{Name: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	var nilAny *anypb.Any

	for _, tc := range []struct {
		name    string
		options typeurl.Any
		want    string // "" = decodes to cfg; else a substring of the error
	}{
		{"as containerd sends it", containerdOptions(t, cfg, "").GetOptions(), ""},
		{"typeurl.Any", typeurlAny, ""},
		{"prefixed type URL", prefixed, ""},
		{"nil interface", nil, "no options"},
		{"nil *anypb.Any", nilAny, "no options"},
		{"empty Any", &anypb.Any{}, "no options"},
		{"another message", other, `"type.googleapis.com/runtime.v1.ContainerConfig", not a CRI PodSandboxConfig`},
		{"old API version", &anypb.Any{TypeUrl: "runtime.v1alpha2.PodSandboxConfig", Value: value}, "not a CRI PodSandboxConfig"},
		{"URL with the name as a suffix only", &anypb.Any{TypeUrl: "x.runtime.v1.PodSandboxConfig", Value: value}, "not a CRI PodSandboxConfig"},
		{"no type URL", &anypb.Any{Value: value}, "not a CRI PodSandboxConfig"},
		{"empty value", &anypb.Any{TypeUrl: ConfigTypeURL}, "empty PodSandboxConfig"},
		{"garbage", &anypb.Any{TypeUrl: ConfigTypeURL, Value: []byte("\xff\xff\xff\xff garbage")}, "not a valid protobuf-encoded PodSandboxConfig"},
		{"truncated", &anypb.Any{TypeUrl: ConfigTypeURL, Value: value[:len(value)-3]}, "not a valid protobuf-encoded PodSandboxConfig"},
		{"JSON instead of protobuf", &anypb.Any{TypeUrl: ConfigTypeURL, Value: []byte(`{"metadata":{"name":"web"}}`)}, "not a valid protobuf-encoded PodSandboxConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.options)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !proto.Equal(got, cfg) {
					t.Fatalf("Decode = %v, want %v", got, cfg)
				}
				return
			}
			if !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error = %v, want invalid argument containing %q", err, tc.want)
			}
			if got != nil {
				t.Fatalf("Decode returned a config with its error: %v", got)
			}
		})
	}
}

func TestFromCreateSandbox(t *testing.T) {
	const guid = "5f2a1b9e-3c44-4d7a-9a0e-0123456789ab"
	req := containerdOptions(t, kubeletWindowsConfig(), guid)
	pod, err := FromCreateSandbox(req.GetOptions(), req.GetNetnsPath())
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "web-0" || pod.Network.Namespace != guid || pod.Hostname != "web-0" {
		t.Fatalf("pod = %+v", pod)
	}
	if len(req.GetAnnotations()) != 0 {
		t.Fatalf("containerd's CRI sends no sandbox annotations, the test request has %v", req.GetAnnotations())
	}

	if _, err := FromCreateSandbox(nil, guid); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("no options: %v", err)
	}
	if _, err := FromCreateSandbox(req.GetOptions(), "not-a-namespace"); !errdefs.IsInvalidArgument(err) || !strings.Contains(err.Error(), "netns_path") {
		t.Fatalf("bad netns: %v", err)
	}
	// A HostProcess pod has the host's network: no netns_path.
	req = containerdOptions(t, kubeletHostProcessConfig(), "")
	if pod, err := FromCreateSandbox(req.GetOptions(), ""); err != nil || !pod.HostProcess || pod.Network.Namespace != "" {
		t.Fatalf("HostProcess: %+v, %v", pod, err)
	}
}
