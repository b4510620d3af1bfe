package sandbox

import (
	"context"
	"time"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// A HostProcess pod has no pause container: its containers run on the
// host, in the host's network, and nothing of the pod would run in one
// (runhcs fakes the sandbox task for the same reason, hcsshim
// cmd/containerd-shim-runhcs-v1 pod.go). The sandbox is the shim's own
// record: ready from StartSandbox to StopSandbox, with no process, no
// rootfs and no pause image.
type hostProcessSandbox struct {
	stopped  chan struct{} // closed by stop
	exitedAt time.Time     // set before stopped closes
	started  bool
}

func newHostProcessSandbox() *hostProcessSandbox {
	return &hostProcessSandbox{stopped: make(chan struct{})}
}

// stop marks the sandbox stopped, once.
func (h *hostProcessSandbox) stop() {
	select {
	case <-h.stopped:
	default:
		h.exitedAt = time.Now()
		close(h.stopped)
	}
}

func (h *hostProcessSandbox) isStopped() bool {
	select {
	case <-h.stopped:
		return true
	default:
		return false
	}
}

// wait returns once the sandbox is stopped, or ctx ends.
func (h *hostProcessSandbox) wait(ctx context.Context) (time.Time, error) {
	select {
	case <-h.stopped:
		return h.exitedAt, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// hostProcessPodSpec is the spec StartSandbox hands containerd for a
// HostProcess pod (containerd gives it to NRI plugins): the annotations
// containerd's CRI puts on a pause container, with no process.
func hostProcessPodSpec(id string) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{},
		Annotations: map[string]string{
			annotations.KubernetesContainerType: "sandbox",
			annotations.KubernetesSandboxID:     id,
			annotations.HostProcessContainer:    "true",
		},
		Windows: &specs.Windows{},
	}
}
