package jobcontainer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/relay"
)

// process is a compute.Process over a process handle.
//
// One goroutine (wait) waits for the process's exit or for Close (an
// event), reads the exit code, drains the output for at most the
// backend's drain timeout, closes the handles and then done. The handles
// are used under hmu for reading and closed under it for writing.
type process struct {
	sys      *system
	pid      int
	terminal bool
	relay    *relay.Relay

	hmu     sync.RWMutex
	h       handle // the process; 0 once closed
	cancel  handle // the event Close sets
	console handle // the pseudo console of a Terminal process, or 0

	exited chan struct{} // closed once the exit is known
	done   chan struct{} // closed once exited, drained and the handles closed

	mu      sync.Mutex
	closed  bool
	code    int
	exitErr error
}

var _ compute.Process = (*process)(nil)

// wait owns the process's exit.
func (p *process) wait() {
	host := p.sys.b.host
	exited, werr := host.waitProcess(p.h, p.cancel)
	var code uint32
	var cerr error
	if exited && werr == nil {
		code, cerr = host.exitCode(p.h)
	}
	p.mu.Lock()
	switch {
	case werr != nil:
		p.exitErr = fmt.Errorf("process %d: waiting for its exit: %w: %w", p.pid, werr, errdefs.ErrUnavailable)
	case !exited:
		p.exitErr = fmt.Errorf("process %d: closed before it exited: %w", p.pid, errdefs.ErrFailedPrecondition)
	case cerr != nil:
		p.exitErr = fmt.Errorf("process %d: exit code: %w: %w", p.pid, cerr, errdefs.ErrUnavailable)
	default:
		// The 32-bit exit status, unsigned: a crash's NTSTATUS such as
		// 0xC0000005 reaches containerd whole.
		p.code = int(code)
	}
	p.mu.Unlock()
	close(p.exited)
	p.sys.forget(p)
	p.relay.CloseStdinPipe()
	p.hmu.Lock()
	if p.console != 0 {
		// The pseudo console holds its output pipe open until it is
		// closed: its end is the output's EOF.
		host.closePseudoConsole(p.console)
		p.console = 0
	}
	p.hmu.Unlock()

	t := time.NewTimer(p.sys.b.drain)
	select {
	case <-p.relay.OutputDone():
	case <-t.C:
		log.L.WithFields(log.Fields{"id": p.sys.id, "pid": p.pid, "timeout": p.sys.b.drain}).
			Warn("process output still open after its exit (held by a process it started?); no longer copied")
		p.relay.CloseOutput()
	}
	t.Stop()

	p.hmu.Lock()
	for _, h := range []handle{p.h, p.cancel} {
		if err := host.closeHandle(h); err != nil {
			log.L.WithError(err).WithField("pid", p.pid).Warn("close a process's handle")
		}
	}
	p.h, p.cancel = 0, 0
	p.hmu.Unlock()
	close(p.done)
}

// systemStopped runs when the job had no process left while this one was
// tracked: it is gone already, or was never in the job (it started as the
// system stopped); the latter is terminated.
func (p *process) systemStopped() {
	if err := p.withHandle(func(h handle) error { return p.sys.b.host.terminateProcess(h, 1) }); err != nil {
		log.L.WithError(err).WithField("pid", p.pid).Debug("terminate a process of a stopped HostProcess container")
	}
}

func (p *process) Pid() int { return p.pid }

// check fails for a process that was closed (FailedPrecondition) or has
// exited (NotFound).
func (p *process) check() error {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return fmt.Errorf("process %d has been closed: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("process %d has exited: %w", p.pid, errdefs.ErrNotFound)
	default:
		return nil
	}
}

// withHandle runs f with the process handle, held against its closing.
func (p *process) withHandle(f func(h handle) error) error {
	p.hmu.RLock()
	defer p.hmu.RUnlock()
	if err := p.check(); err != nil {
		return err
	}
	return f(p.h)
}

// fail classifies a failed call on the process; one that exited meanwhile
// is NotFound.
func (p *process) fail(what string, err error) error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s process %d: it has exited: %w", what, p.pid, errdefs.ErrNotFound)
	default:
	}
	return classify(fmt.Sprintf("%s process %d in HostProcess container %s", what, p.pid, p.sys.id), err, p.sys.b.host.facts(err))
}

// ctrlEvents are the console control events' numbers.
var ctrlEvents = map[compute.Signal]uint32{
	compute.CtrlC:        ctrlCEvent,
	compute.CtrlBreak:    ctrlBreakEvent,
	compute.CtrlClose:    ctrlCloseEvent,
	compute.CtrlLogOff:   ctrlLogoffEvent,
	compute.CtrlShutdown: ctrlShutdownEvent,
}

// Signal runs the process's console control handlers for the event, as
// runhcs signals a HostProcess container's processes: a thread of the
// process runs kernel32's CtrlRoutine (what Windows itself runs for a
// console's events), whatever console the process has, for every event
// (GenerateConsoleCtrlEvent reaches only processes of the caller's
// console, and only with CTRL_C and CTRL_BREAK). A process without a
// handler for it ends, as on a console.
func (p *process) Signal(ctx context.Context, s compute.Signal) error {
	event, ok := ctrlEvents[s]
	if !ok {
		return invalid("process %d: %v is not a console control event", p.pid, s)
	}
	if err := p.withHandle(func(h handle) error { return p.sys.b.host.ctrlEvent(h, event) }); err != nil {
		if errdefs.IsNotFound(err) || errdefs.IsFailedPrecondition(err) {
			return err
		}
		return p.fail(fmt.Sprintf("send %v to", s), err)
	}
	return nil
}

// Kill is TerminateProcess with exit code 1, as runhcs kills a process.
func (p *process) Kill(ctx context.Context) error {
	if err := p.withHandle(func(h handle) error { return p.sys.b.host.terminateProcess(h, 1) }); err != nil {
		if errdefs.IsNotFound(err) || errdefs.IsFailedPrecondition(err) {
			return err
		}
		return p.fail("kill", err)
	}
	return nil
}

// Wait is closed once the process has exited and its output has been
// copied, or the drain timeout passed.
func (p *process) Wait() <-chan struct{} { return p.done }

// ExitCode is the exit code once Wait is closed.
func (p *process) ExitCode() (int, error) {
	select {
	case <-p.done:
	default:
		return -1, fmt.Errorf("process %d has not exited: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exitErr != nil {
		return -1, p.exitErr
	}
	return p.code, nil
}

// ResizeConsole is ResizePseudoConsole.
func (p *process) ResizeConsole(ctx context.Context, width, height uint16) error {
	if !p.terminal {
		return fmt.Errorf("process %d has no console: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	err := p.withHandle(func(handle) error {
		if p.console == 0 {
			return fmt.Errorf("process %d has exited: %w", p.pid, errdefs.ErrNotFound)
		}
		return p.sys.b.host.resizePseudoConsole(p.console, width, height)
	})
	if err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
		return p.fail("resize the console of", err)
	}
	return err
}

// Close stops the copies and lets wait close the handles. It neither
// kills nor waits, but a Terminal process that is still running ends:
// wait closes its pseudo console with the handles, and ClosePseudoConsole
// ends the processes attached to it (its documentation). Keeping the
// console open would not serve the process either: Close closes the
// reading end of the console's output, so what the process writes has
// nowhere to go. The shim closes a process only after its exit.
func (p *process) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.relay.CloseStdinPipe()
	p.relay.CloseOutput()
	p.hmu.RLock()
	defer p.hmu.RUnlock()
	if p.cancel == 0 {
		return nil
	}
	if err := p.sys.b.host.setEvent(p.cancel); err != nil {
		return classify(fmt.Sprintf("close process %d", p.pid), err, p.sys.b.host.facts(err))
	}
	return nil
}
