package jobcontainer

import (
	"context"
	"fmt"
	"sync"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/procexit"
	"github.com/winproc/winproc/shim/relay"
)

// process is a compute.Process over a process handle.
//
// One goroutine (wait) waits for the process's exit or for Close (an
// event), reads the exit code, drains the output for at most the
// backend's drain timeout, closes the handles and then is done. The
// handles are used under hmu for reading and closed under it for writing.
type process struct {
	sys      *system
	pid      int
	terminal bool
	relay    *relay.Relay
	exit     *procexit.Exit // done once exited, drained and the handles closed

	hmu     sync.RWMutex
	h       handle // the process; 0 once closed
	cancel  handle // the event Close sets
	console handle // the pseudo console of a Terminal process, or 0
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
	p.exit.Record(processExit(p.pid, exited, werr, code, cerr))
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

	p.relay.Drain(p.sys.b.drain)

	p.hmu.Lock()
	for _, h := range []handle{p.h, p.cancel} {
		if err := host.closeHandle(h); err != nil {
			log.L.WithError(err).WithField("pid", p.pid).Warn("close a process's handle")
		}
	}
	p.h, p.cancel = 0, 0
	p.hmu.Unlock()
	p.exit.Done()
}

// processExit reads the end of waitProcess and exitCode: the exit code,
// or why there is none; exited is false when Close ended the wait.
func processExit(pid int, exited bool, werr error, code uint32, cerr error) (int, error) {
	switch {
	case werr != nil:
		return -1, fmt.Errorf("process %d: waiting for its exit: %w: %w", pid, werr, errdefs.ErrUnavailable)
	case !exited:
		return -1, fmt.Errorf("process %d: closed before it exited: %w", pid, errdefs.ErrFailedPrecondition)
	case cerr != nil:
		return -1, fmt.Errorf("process %d: exit code: %w: %w", pid, cerr, errdefs.ErrUnavailable)
	}
	// The 32-bit exit status, unsigned: a crash's NTSTATUS such as
	// 0xC0000005 reaches containerd whole.
	return int(code), nil
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

// withHandle runs f with the process handle, held against its closing.
func (p *process) withHandle(f func(h handle) error) error {
	p.hmu.RLock()
	defer p.hmu.RUnlock()
	if err := p.exit.Check(); err != nil {
		return err
	}
	return f(p.h)
}

// fail classifies a failed call on the process; one that exited meanwhile
// is NotFound.
func (p *process) fail(what string, err error) error {
	select {
	case <-p.exit.Exited():
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
func (p *process) Wait() <-chan struct{} { return p.exit.Wait() }

// ExitCode is the exit code once Wait is closed.
func (p *process) ExitCode() (int, error) { return p.exit.ExitCode() }

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
	if !p.exit.Close() {
		return nil
	}
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
