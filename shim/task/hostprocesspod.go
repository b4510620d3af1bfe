package task

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// hostProcessPod is the compute system of a HostProcess pod's pause
// container, which containerd runs as a task in podsandbox mode: nothing.
// A HostProcess pod's containers run on the host in the host's network,
// and nothing of the pod would run in a pause container, so runhcs fakes
// the sandbox task (hcsshim cmd/containerd-shim-runhcs-v1 pod.go) and so
// does this: its one process runs from start until it is signalled or
// killed, or the system stops, and uses nothing.
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
