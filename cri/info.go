package cri

import (
	"encoding/json"
	"fmt"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	// SandboxInfoKey is the SandboxStatusResponse.Info key containerd's
	// CRI reads back as its podsandbox SandboxInfo.
	SandboxInfoKey = "info"
	// PodInfoKey is the Info key holding the pod's settings (Pod as JSON).
	PodInfoKey = "winproc"
)

// RuntimeStatus is what the shim knows about the running sandbox, for the
// "info" key.
type RuntimeStatus struct {
	// Pid is the pause process's id; 0 when none runs.
	Pid uint32
	// ProcessStatus is the pause process's state: "created", "running",
	// "stopped", ...
	ProcessStatus string
	// Image is the pause image's name.
	Image string
	// Snapshotter and SnapshotKey are the pause container's rootfs
	// snapshot.
	Snapshotter string
	SnapshotKey string
	// RuntimeType is the runtime, io.containerd.winproc.v2.
	RuntimeType string
	// RuntimeOptions are the shim's runtime options, JSON-friendly; nil
	// for none.
	RuntimeOptions any
	// NetNSClosed says the pod's network namespace is gone.
	NetNSClosed bool
}

// sandboxInfo has the JSON shape of containerd's
// internal/cri/server/podsandbox/types.SandboxInfo (the fields winproc
// knows), so that containerd's PodSandboxStatus decodes the "info" key.
type sandboxInfo struct {
	Pid            uint32                    `json:"pid"`
	Status         string                    `json:"processStatus"`
	NetNSClosed    bool                      `json:"netNamespaceClosed"`
	Image          string                    `json:"image"`
	SnapshotKey    string                    `json:"snapshotKey"`
	Snapshotter    string                    `json:"snapshotter"`
	RuntimeType    string                    `json:"runtimeType"`
	RuntimeOptions any                       `json:"runtimeOptions"`
	Config         *runtime.PodSandboxConfig `json:"config"`
}

// VerboseInfo is SandboxStatusResponse.Info for a verbose status request:
// "info" in containerd's SandboxInfo shape (with the pod's
// PodSandboxConfig) and "winproc", the pod's settings. Both are JSON
// objects, which crictl inspectp prints as such.
func VerboseInfo(pod *Pod, rs RuntimeStatus) (map[string]string, error) {
	if pod == nil {
		return nil, invalid("no pod settings for the sandbox status")
	}
	info, err := json.Marshal(sandboxInfo{
		Pid:            rs.Pid,
		Status:         rs.ProcessStatus,
		NetNSClosed:    rs.NetNSClosed,
		Image:          rs.Image,
		SnapshotKey:    rs.SnapshotKey,
		Snapshotter:    rs.Snapshotter,
		RuntimeType:    rs.RuntimeType,
		RuntimeOptions: rs.RuntimeOptions,
		Config:         pod.Config,
	})
	if err != nil {
		return nil, fmt.Errorf("encode the sandbox info of pod %s: %w", pod.ref(), err)
	}
	settings, err := json.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("encode the settings of pod %s: %w", pod.ref(), err)
	}
	return map[string]string{
		SandboxInfoKey: string(info),
		PodInfoKey:     string(settings),
	}, nil
}
