// Package computetest is the one fake of the compute seam, for tests of the
// shim's services: systems and processes that exit when told to, record
// what was asked of them, and never touch HCS or Wine.
package computetest

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// Backend is a fake compute backend.
type Backend struct {
	// CreateErr, when set, fails Create: a backend refusing the settings.
	CreateErr error

	mu      sync.Mutex
	systems map[string]*System
}

// NewBackend returns an empty fake backend.
func NewBackend() *Backend { return &Backend{systems: map[string]*System{}} }

func (b *Backend) Create(_ context.Context, id string, s *compute.Settings) (compute.System, error) {
	if b.CreateErr != nil {
		return nil, b.CreateErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.systems[id]; ok {
		return nil, errdefs.ErrAlreadyExists
	}
	sys := &System{id: id, Settings: s, stopped: make(chan struct{})}
	b.systems[id] = sys
	return sys, nil
}

func (b *Backend) Open(_ context.Context, id string) (compute.System, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.systems[id]; ok {
		return s, nil
	}
	return nil, errdefs.ErrNotFound
}

func (b *Backend) HostCPUs() int { return 4 }

// System returns the system created for id, nil if none.
func (b *Backend) System(id string) *System {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.systems[id]
}

type System struct {
	id       string
	Settings *compute.Settings

	mu             sync.Mutex
	Started        bool
	ShutdownCalled bool
	Terminated     bool
	Closed         bool
	ShutdownErr    error
	// Lingering makes Shutdown leave the system running, as a process
	// that ignores the event does; Grace, when set, is its ShutdownGrace.
	Lingering bool
	Grace     time.Duration
	// CreateErr, when set, fails CreateProcess.
	CreateErr error
	// Modified are the limits Modify applied, in order; ModifyErr, when
	// set, is asked first and fails the Modify it answers an error to
	// (which then applies nothing).
	Modified  []compute.Resources
	ModifyErr func(compute.Resources) error
	// Memory, when set, is the memory Stats reports.
	Memory   *compute.MemoryStats
	procs    []*Process
	stopped  chan struct{}
	stopOnce sync.Once
}

func (s *System) ID() string { return s.id }

func (s *System) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Started = true
	return nil
}

func (s *System) stop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		procs := append([]*Process(nil), s.procs...)
		s.mu.Unlock()
		for _, p := range procs {
			p.Exit(1)
		}
		close(s.stopped)
	})
}

func (s *System) Shutdown(context.Context) error {
	s.mu.Lock()
	s.ShutdownCalled = true
	err := s.ShutdownErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if !s.Lingering {
		s.stop()
	}
	return nil
}

// ShutdownGrace is Grace, or the task's default when Grace is not set.
func (s *System) ShutdownGrace() time.Duration {
	if s.Grace > 0 {
		return s.Grace
	}
	return 30 * time.Second
}

func (s *System) Terminate(context.Context) error {
	s.mu.Lock()
	s.Terminated = true
	s.mu.Unlock()
	s.stop()
	return nil
}

func (s *System) Wait() <-chan struct{} { return s.stopped }
func (s *System) ExitError() error      { return nil }

func (s *System) Stats(context.Context) (*compute.Stats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mem := compute.MemoryStats{CommitBytes: 1 << 20, PrivateWorkingSetBytes: 1 << 19}
	if s.Memory != nil {
		mem = *s.Memory
	}
	return &compute.Stats{
		Timestamp: time.Now(),
		CPU:       compute.CPUStats{TotalRuntimeNS: 5e6, RuntimeUserNS: 4e6, RuntimeKernelNS: 1e6},
		Memory:    mem,
	}, nil
}

func (s *System) ProcessList(context.Context) ([]compute.ProcessInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var list []compute.ProcessInfo
	for _, p := range s.procs {
		select {
		case <-p.exited:
		default:
			list = append(list, compute.ProcessInfo{Pid: uint32(p.pid), ImageName: imageName(p.settings.CommandLine), UserTime: time.Duration(p.pid) * time.Millisecond})
		}
	}
	return list, nil
}

func (s *System) Modify(_ context.Context, r compute.Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ModifyErr != nil {
		if err := s.ModifyErr(r); err != nil {
			return err
		}
	}
	s.Modified = append(s.Modified, r)
	return nil
}

func (s *System) CreateProcess(_ context.Context, ps *compute.ProcessSettings) (compute.Process, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.CreateErr != nil {
		return nil, s.CreateErr
	}
	if !s.Started {
		return nil, errors.New("system not started")
	}
	p := &Process{pid: 1000 + len(s.procs), settings: ps, exited: make(chan struct{}), StdinEOF: make(chan struct{})}
	s.procs = append(s.procs, p)
	if ps.Stdin != nil {
		go p.readStdin(ps.Stdin)
	} else {
		close(p.StdinEOF)
	}
	return p, nil
}

func (s *System) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Closed = true
	return nil
}

// Proc returns the i-th process created in the system.
func (s *System) Proc(i int) *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.procs[i]
}

type Process struct {
	pid      int
	settings *compute.ProcessSettings

	mu      sync.Mutex
	Signals []compute.Signal
	// SignalErr, when set, fails Signal.
	SignalErr error
	Killed    bool
	Closed    bool
	// Stdin is what the process read from its standard input; StdinEOF
	// is closed when that reached EOF.
	Stdin    []byte
	StdinEOF chan struct{}
	code     int
	exited   chan struct{}
	once     sync.Once
}

// readStdin copies the process's standard input until EOF, as a backend
// must.
func (p *Process) readStdin(r io.Reader) {
	defer close(p.StdinEOF)
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		p.mu.Lock()
		p.Stdin = append(p.Stdin, buf[:n]...)
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Exit makes the process exit with code.
func (p *Process) Exit(code int) {
	p.once.Do(func() {
		p.mu.Lock()
		p.code = code
		p.mu.Unlock()
		close(p.exited)
	})
}

func (p *Process) Pid() int { return p.pid }

// Settings returns what the process was created with.
func (p *Process) Settings() *compute.ProcessSettings { return p.settings }

// Signal: a console event makes the fake program exit 0, as a program with
// a console handler does.
func (p *Process) Signal(_ context.Context, s compute.Signal) error {
	p.mu.Lock()
	if err := p.SignalErr; err != nil {
		p.mu.Unlock()
		return err
	}
	p.Signals = append(p.Signals, s)
	p.mu.Unlock()
	p.Exit(0)
	return nil
}

func (p *Process) Kill(context.Context) error {
	p.mu.Lock()
	p.Killed = true
	p.mu.Unlock()
	p.Exit(137)
	return nil
}

func (p *Process) Wait() <-chan struct{} { return p.exited }

func (p *Process) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}

func (p *Process) ResizeConsole(context.Context, uint16, uint16) error { return nil }

func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.Closed = true
	return nil
}

// imageName is the file name of a command line's program, as Windows
// reports a process's image.
func imageName(commandLine string) string {
	first, _, _ := strings.Cut(commandLine, " ")
	return first[strings.LastIndexByte(first, '\\')+1:]
}
