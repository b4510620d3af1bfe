package process

import (
	"context"
	"sync"

	"github.com/winproc/winproc/shim/compute"
)

// fakeSystem is the compute seam for these tests: it creates fakeProcs and
// remembers them.
type fakeSystem struct {
	compute.System // unused methods panic
	mu             sync.Mutex
	procs          []*fakeProc
	createErr      error
}

func (s *fakeSystem) CreateProcess(_ context.Context, ps *compute.ProcessSettings) (compute.Process, error) {
	if s.createErr != nil {
		return nil, s.createErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &fakeProc{pid: 100 + len(s.procs), settings: ps, exited: make(chan struct{}), stdinEOF: make(chan struct{})}
	s.procs = append(s.procs, p)
	if ps.Stdin != nil {
		// As a backend must: copy Stdin into the process until EOF; what
		// arrives after the process's stdin was closed is lost, as with a
		// real pipe.
		go func() {
			defer close(p.stdinEOF)
			buf := make([]byte, 4096)
			for {
				n, err := ps.Stdin.Read(buf)
				p.mu.Lock()
				if !p.stdinShut {
					p.stdin = append(p.stdin, buf[:n]...)
				}
				p.mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	return p, nil
}

// fakeProc exits when told to, or when killed (status 137) or signalled
// with an event it reacts to.
type fakeProc struct {
	pid      int
	settings *compute.ProcessSettings

	mu        sync.Mutex
	signals   []compute.Signal
	signalErr error
	killed    bool
	closed    bool
	stdinShut bool
	stdin     []byte        // what the process read from stdin
	stdinEOF  chan struct{} // closed when stdin reached EOF
	code      int
	exited    chan struct{}
	once      sync.Once
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

func (p *fakeProc) Signal(_ context.Context, s compute.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.signalErr != nil {
		return p.signalErr
	}
	p.signals = append(p.signals, s)
	return nil
}

func (p *fakeProc) Kill(context.Context) error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	p.exit(137)
	return nil
}

func (p *fakeProc) Wait() <-chan struct{} { return p.exited }

func (p *fakeProc) ExitCode() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, nil
}

func (p *fakeProc) ResizeConsole(context.Context, uint16, uint16) error { return nil }

func (p *fakeProc) CloseStdin(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdinShut = true
	return nil
}

func (p *fakeProc) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return nil
}
