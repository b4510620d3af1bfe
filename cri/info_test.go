package cri

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"google.golang.org/protobuf/proto"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerdSandboxInfo copies containerd v2.4.2's
// internal/cri/server/podsandbox/types.SandboxInfo (its JSON shape; the
// types containerd-internal fields need are json.RawMessage here).
// containerd's PodSandboxStatus json.Unmarshals the "info" key into it and
// fails the status if that fails.
type containerdSandboxInfo struct {
	Pid            uint32                      `json:"pid"`
	Status         string                      `json:"processStatus"`
	NetNSClosed    bool                        `json:"netNamespaceClosed"`
	Image          string                      `json:"image"`
	SnapshotKey    string                      `json:"snapshotKey"`
	Snapshotter    string                      `json:"snapshotter"`
	RuntimeType    string                      `json:"runtimeType"`
	RuntimeOptions any                         `json:"runtimeOptions"`
	Config         *runtime.PodSandboxConfig   `json:"config"`
	RuntimeSpec    json.RawMessage             `json:"runtimeSpec"`
	CNIResult      json.RawMessage             `json:"cniResult"`
	Metadata       json.RawMessage             `json:"sandboxMetadata"`
	Overhead       *runtime.ContainerResources `json:"overhead,omitempty"`
	Resources      *runtime.ContainerResources `json:"resources,omitempty"`
}

func TestVerboseInfo(t *testing.T) {
	cfg := kubeletWindowsConfig()
	pod, err := FromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pod.SetNetworkNamespace("5f2a1b9e-3c44-4d7a-9a0e-0123456789ab"); err != nil {
		t.Fatal(err)
	}
	info, err := VerboseInfo(pod, RuntimeStatus{
		Pid: 4242, ProcessStatus: "running", Image: "registry.k8s.io/pause:3.10",
		Snapshotter: "winproc", SnapshotKey: "sb1", RuntimeType: "io.containerd.winproc.v2",
		RuntimeOptions: map[string]any{"debug": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(info) != 2 {
		t.Fatalf("info has keys %v, want info and winproc", reflect.ValueOf(info).MapKeys())
	}
	// crictl inspectp prints a value as a JSON object when it starts with "{".
	for k, v := range info {
		if !strings.HasPrefix(v, "{") {
			t.Errorf("info[%q] does not start with {: %s", k, v)
		}
	}

	// containerd reads "info" back into its SandboxInfo.
	var si containerdSandboxInfo
	if err := json.Unmarshal([]byte(info[SandboxInfoKey]), &si); err != nil {
		t.Fatalf("containerd cannot decode info[%q]: %v", SandboxInfoKey, err)
	}
	if si.Pid != 4242 || si.Status != "running" || si.Image != "registry.k8s.io/pause:3.10" ||
		si.Snapshotter != "winproc" || si.SnapshotKey != "sb1" || si.RuntimeType != "io.containerd.winproc.v2" ||
		!reflect.DeepEqual(si.RuntimeOptions, map[string]any{"debug": true}) {
		t.Fatalf("info = %+v", si)
	}
	if !proto.Equal(si.Config, cfg) {
		t.Fatalf("info.config = %v, want %v", si.Config, cfg)
	}

	// "winproc" is the pod settings.
	var got Pod
	if err := json.Unmarshal([]byte(info[PodInfoKey]), &got); err != nil {
		t.Fatal(err)
	}
	want := *pod
	want.Config = nil
	want.GMSA = &GMSA{Account: "WebApp01", Domain: "contoso.com"} // the spec text stays out
	if !reflect.DeepEqual(&got, &want) {
		t.Fatalf("winproc =\n%+v\nwant\n%+v", &got, &want)
	}
	for _, w := range []string{`"hostname":"web-0"`, `"namespace":"5f2a1b9e-3c44-4d7a-9a0e-0123456789ab"`, `"ignoredOptions":["ndots:5"]`, `"runAsUserName":"CONTOSO\\WebApp01$"`} {
		if !strings.Contains(info[PodInfoKey], w) {
			t.Errorf("winproc %s does not contain %s", info[PodInfoKey], w)
		}
	}
	if strings.Contains(info[PodInfoKey], "S-1-5-21") {
		t.Errorf("winproc repeats the credential spec: %s", info[PodInfoKey])
	}

	if _, err := VerboseInfo(nil, RuntimeStatus{}); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("VerboseInfo(nil) = %v", err)
	}
}
