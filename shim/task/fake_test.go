package task

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// fakeBackend is the compute seam for the service tests.
type fakeBackend struct {
	mu      sync.Mutex
	systems map[string]*fakeSystem
}

func newFakeBackend() *fakeBackend { return &fakeBackend{systems: map[string]*fakeSystem{}} }

func (b *fakeBackend) Create(_ context.Context, id string, s *compute.Settings) (compute.System, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.systems[id]; ok {
		return nil, errdefs.ErrAlreadyExists
	}
	sys := &fakeSystem{id: id, settings: s, stopped: make(chan struct{})}
	b.systems[id] = sys
	return sys, nil
}

func (b *fakeBackend) Open(_ context.Context, id string) (compute.System, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.systems[id]; ok {
		return s, nil
	}
	return nil, errdefs.ErrNotFound
}

func (b *fakeBackend) HostCPUs() int { return 4 }

func (b *fakeBackend) system(id string) *fakeSystem {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.systems[id]
}

type fakeSystem struct {
	id       string
	settings *compute.Settings

	mu          sync.Mutex
	started     bool
	shutdown    bool
	terminated  bool
	closed      bool
	shutdownErr error
	modified    []compute.Resources
	procs       []*fakeProc
	stopped     chan struct{}
	stopOnce    sync.Once
}

func (s *fakeSystem) ID() string { return s.id }

func (s *fakeSystem) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	return nil
}

func (s *fakeSystem) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		procs := append([]*fakeProc(nil), s.procs...)
		s.mu.Unlock()
		for _, p := range procs {
			p.exit(1)
		}
		close(s.stopped)
	})
}

func (s *fakeSystem) Shutdown(context.Context) error {
	s.mu.Lock()
	s.shutdown = true
	err := s.shutdownErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.stop()
	return nil
}

func (s *fakeSystem) Terminate(context.Context) error {
	s.mu.Lock()
	s.terminated = true
	s.mu.Unlock()
	s.stop()
	return nil
}

func (s *fakeSystem) Wait() <-chan struct{} { return s.stopped }
func (s *fakeSystem) ExitError() error      { return nil }

func (s *fakeSystem) Stats(context.Context) (*compute.Stats, error) {
	return &compute.Stats{
		Timestamp: time.Now(),
		CPU:       compute.CPUStats{TotalRuntimeNS: 5e6, RuntimeUserNS: 4e6, RuntimeKernelNS: 1e6},
		Memory:    compute.MemoryStats{CommitBytes: 1 << 20, PrivateWorkingSetBytes: 1 << 19},
	}, nil
}

func (s *fakeSystem) ProcessList(context.Context) ([]compute.ProcessInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []compute.ProcessInfo
	for _, p := range s.procs {
		select {
		case <-p.exited:
		default:
			list = append(list, compute.ProcessInfo{Pid: uint32(p.pid)})
		}
	}
	return list, nil
}

func (s *fakeSystem) Modify(_ context.Context, r compute.Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.modified = append(s.modified, r)
	return nil
}

func (s *fakeSystem) CreateProcess(_ context.Context, ps *compute.ProcessSettings) (compute.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil, errors.New("system not started")
	}
	p := &fakeProc{pid: 1000 + len(s.procs), settings: ps, exited: make(chan struct{})}
	s.procs = append(s.procs, p)
	return p, nil
}

func (s *fakeSystem) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *fakeSystem) proc(i int) *fakeProc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[i]
}

type fakeProc struct {
	pid      int
	settings *compute.ProcessSettings

	mu      sync.Mutex
	signals []compute.Signal
	code    int
	exited  chan struct{}
	once    sync.Once
}

func (p *fakeProc) exit(code int) {
	p.once.Do(func() {
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(p.exited)
	})
}

func (p *fakeProc) Pid() int { return p.pid }

// Signal: a console event makes the fake program exit 0, as a program with
// a console handler does.
func (p *fakeProc) Signal(_ context.Context, s compute.Signal) error {
	p.mu.Lock()
	p.signals = append(p.signals, s)
	p.mu.Unlock()
	p.exit(0)
	return nil
}

func (p *fakeProc) Kill(context.Context) error { p.exit(137); return nil }
func (p *fakeProc) Wait() <-chan struct{}      { return p.exited }

func (p *fakeProc) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}

func (p *fakeProc) ResizeConsole(context.Context, uint16, uint16) error { return nil }
func (p *fakeProc) CloseStdin(context.Context) error                    { return nil }
func (p *fakeProc) Close() error                                        { return nil }

// recorder is the event publisher: it keeps the topics in order.
type recorder struct {
	mu     sync.Mutex
	topics []string
}

func (r *recorder) Publish(_ context.Context, topic string, _ events.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.topics = append(r.topics, topic)
	return nil
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.topics...)
}

// shutdownRecorder is the shim's shutdown service.
type shutdownRecorder struct {
	mu   sync.Mutex
	done bool
}

func (s *shutdownRecorder) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
}
func (s *shutdownRecorder) RegisterCallback(func(context.Context) error) {}
func (s *shutdownRecorder) Done() <-chan struct{}                        { return nil }
func (s *shutdownRecorder) Err() error                                   { return nil }
