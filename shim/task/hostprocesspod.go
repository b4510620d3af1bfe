package task

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	"github.com/containerd/errdefs"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/specconv"
)

// A HostProcess pod has no pause container: its containers run on the
// host in the host's network, and nothing of the pod would run in one. So
// runhcs fakes the sandbox task without translating its spec (hcsshim
// cmd/containerd-shim-runhcs-v1 pod.go, createPod), and so does this file,
// the one place that does, for both sandbox modes: the sandbox's task, made
// from containerd's pause spec (podsandbox mode) or from HostProcessPodSpec
// (the sandbox service, shim mode), has the system hostProcessPod, whose
// one process runs from start until it is signalled or killed, or the
// system stops, and uses nothing. It keeps the shim serving while the pod
// stays, and answers the sandbox's task statistics (containerd's Windows
// CRI fails the node's whole pod stats call without them).

// HostProcessPodSpec is the spec of a HostProcess pod's sandbox in shim
// mode, which StartSandbox also hands containerd (for NRI plugins): the
// annotations containerd's CRI puts on a pause container, with no process.
func HostProcessPodSpec(id string) *specs.Spec {
	return &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{},
		Annotations: map[string]string{
			annotations.KubernetesContainerType: criSandbox,
			annotations.KubernetesSandboxID:     id,
			annotations.HostProcessContainer:    "true",
		},
		Windows: &specs.Windows{},
	}
}

// isHostProcessPod reports whether spec is a HostProcess pod's sandbox:
// containerd's CRI marks a pod's pause container with
// io.kubernetes.cri.container-type sandbox.
func isHostProcessPod(spec *specs.Spec) bool {
	return spec.Annotations[annotations.KubernetesContainerType] == criSandbox && specconv.IsHostProcess(spec)
}

// hostProcessPod is the compute system of a HostProcess pod's sandbox:
// nothing.
type hostProcessPod struct {
	id      string
	started time.Time

	mu      sync.Mutex
	stopped chan struct{}
	proc    *hostProcessPodProcess
}

var _ compute.System = (*hostProcessPod)(nil)

func newHostProcessPod(id string) *hostProcessPod {
	return &hostProcessPod{id: id, stopped: make(chan struct{})}
}

func (s *hostProcessPod) ID() string { return s.id }

func (s *hostProcessPod) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = time.Now()
	return nil
}

func (s *hostProcessPod) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopped:
	default:
		close(s.stopped)
		if s.proc != nil {
			s.proc.exit(0)
		}
	}
}

func (s *hostProcessPod) Shutdown(context.Context) error  { s.stop(); return nil }
func (s *hostProcessPod) Terminate(context.Context) error { s.stop(); return nil }
func (s *hostProcessPod) Wait() <-chan struct{}           { return s.stopped }
func (s *hostProcessPod) ExitError() error                { return nil }
func (s *hostProcessPod) Close() error                    { return nil }

func (s *hostProcessPod) Stats(context.Context) (*compute.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	return &compute.Stats{Timestamp: now, ContainerStartTime: s.started, Uptime: now.Sub(s.started)}, nil
}

func (s *hostProcessPod) ProcessList(context.Context) ([]compute.ProcessInfo, error) { return nil, nil }

// Modify has nothing to limit.
func (s *hostProcessPod) Modify(context.Context, compute.Resources) error { return nil }

// CreateProcess makes the pod's one process.
func (s *hostProcessPod) CreateProcess(context.Context, *compute.ProcessSettings) (compute.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return nil, fmt.Errorf("HostProcess pod %s runs no process but its sandbox's: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	s.proc = &hostProcessPodProcess{exited: make(chan struct{})}
	return s.proc, nil
}

// hostProcessPodProcess is the sandbox's process of a HostProcess pod:
// pid 0, ended by a console event (exit 0, as pause.exe) or a kill (1).
type hostProcessPodProcess struct {
	once   sync.Once
	code   int
	exited chan struct{}
}

func (p *hostProcessPodProcess) exit(code int) {
	p.once.Do(func() {
		p.code = code
		close(p.exited)
	})
}

func (p *hostProcessPodProcess) Pid() int { return 0 }

func (p *hostProcessPodProcess) Signal(context.Context, compute.Signal) error {
	p.exit(0)
	return nil
}

func (p *hostProcessPodProcess) Kill(context.Context) error {
	p.exit(1)
	return nil
}

func (p *hostProcessPodProcess) Wait() <-chan struct{} { return p.exited }

func (p *hostProcessPodProcess) ExitCode() (int, error) {
	select {
	case <-p.exited:
		return p.code, nil
	default:
		return -1, fmt.Errorf("the HostProcess pod's sandbox process has not exited: %w", errdefs.ErrFailedPrecondition)
	}
}

func (p *hostProcessPodProcess) ResizeConsole(context.Context, uint16, uint16) error {
	return fmt.Errorf("the HostProcess pod's sandbox process has no console: %w", errdefs.ErrFailedPrecondition)
}

func (p *hostProcessPodProcess) CloseStdin(context.Context) error { return nil }
func (p *hostProcessPodProcess) Close() error                     { return nil }
