package hcs

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/procexit"
	"github.com/winproc/winproc/shim/relay"
)

// process is a compute.Process over a process handle.
//
// One goroutine (wait) owns the handle's Wait: when it returns, the
// exit code is read, output is drained for at most the backend's drain
// timeout, and the exit is done.
type process struct {
	sys      *system
	hp       hcsProcess
	pid      int
	terminal bool
	relay    *relay.Relay
	exit     *procexit.Exit // exited once HCS reported the exit

	watchOnce sync.Once // watchExit runs once

	mu   sync.Mutex
	lost bool // its system stopped and HCS never reported its exit
}

var _ compute.Process = (*process)(nil)

func newProcess(s *system, hp hcsProcess, ps *compute.ProcessSettings, stdin io.WriteCloser, stdout, stderr io.ReadCloser) *process {
	p := &process{
		sys:      s,
		hp:       hp,
		pid:      hp.Pid(),
		terminal: ps.Terminal,
		exit:     procexit.New(hp.Pid()),
	}
	logger := log.L.WithFields(log.Fields{"id": s.id, "pid": p.pid})
	closeStdin := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), stdinCloseTimeout)
		defer cancel()
		return hp.CloseStdin(ctx)
	}
	p.relay = relay.Start(stdin, stdout, stderr, ps.Stdin, ps.Stdout, ps.Stderr, closeStdin, logger)
	return p
}

// stdinCloseTimeout bounds HCS's closing of a process's stdin at the end
// of its input.
const stdinCloseTimeout = 10 * time.Second

// wait owns the handle's Wait.
func (p *process) wait() {
	werr := p.hp.Wait()
	code, cerr := p.hp.ExitCode()
	f := p.sys.b.api.facts(werr)
	p.mu.Lock()
	lost := p.lost
	p.mu.Unlock()
	p.exit.Record(processExit(p.pid, werr, f, code, cerr, p.exit.Closed(), lost))
	p.sys.forget(p)
	p.relay.CloseStdinPipe()
	p.relay.Drain(p.sys.b.drain)
	p.exit.Done()
}

// processExit reads the end of Process.Wait and Process.ExitCode: the exit
// code, or why there is none. closed is set when Close was called, lost
// when the backend gave up on a process whose system stopped.
//
// hcsshim reports -1 with no error when HCS's last wait result was not
// zero, and -1 with an error when the wait failed; an exit code is the
// process's 32-bit exit status, which hcsshim gives as a non-negative int.
func processExit(pid int, werr error, wf errFacts, code int, cerr error, closed, lost bool) (int, error) {
	switch {
	case werr != nil && wf.AlreadyClosed && lost:
		return -1, fmt.Errorf("process %d: its compute system stopped and HCS never reported its exit: %w", pid, errdefs.ErrUnavailable)
	case werr != nil && wf.AlreadyClosed && closed:
		return -1, fmt.Errorf("process %d: closed before it exited: %w", pid, errdefs.ErrFailedPrecondition)
	case werr != nil:
		return -1, fmt.Errorf("process %d: waiting for its exit: %w: %w", pid, werr, errdefs.ErrUnavailable)
	case cerr != nil:
		return -1, fmt.Errorf("process %d: exit code: %w: %w", pid, cerr, errdefs.ErrUnavailable)
	case code < 0:
		return -1, fmt.Errorf("process %d: HCS reported no exit code: %w", pid, errdefs.ErrUnavailable)
	}
	return code, nil
}

// systemStopped runs when the process's system stopped before HCS reported
// the process's exit. runhcs kills such a process to unblock its wait; if
// even that does not end it, the handle is closed, which ends its Wait,
// and the exit is recorded as lost.
func (p *process) systemStopped() {
	select {
	case <-p.exit.Exited():
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.sys.b.lostProcessTimeout)
	defer cancel()
	if err := p.hp.Kill(ctx); err != nil {
		log.L.WithError(err).WithFields(log.Fields{"id": p.sys.id, "pid": p.pid}).Debug("kill a process of a stopped compute system")
	}
	t := time.NewTimer(p.sys.b.lostProcessTimeout)
	defer t.Stop()
	select {
	case <-p.exit.Exited():
	case <-t.C:
		p.mu.Lock()
		p.lost = true
		p.mu.Unlock()
		log.L.WithFields(log.Fields{"id": p.sys.id, "pid": p.pid}).Warn("no exit reported for a process of a stopped compute system; giving up on it")
		if err := p.hp.Close(); err != nil {
			log.L.WithError(err).Warn("close a lost process")
		}
	}
}

func (p *process) Pid() int { return p.pid }

func (p *process) fail(what string, err error) error {
	return classify(fmt.Sprintf("%s process %d in compute system %s", what, p.pid, p.sys.id), err, p.sys.b.api.facts(err))
}

// signalNames are HCS's names of the console control events
// (SignalProcessOptions).
var signalNames = map[compute.Signal]string{
	compute.CtrlC:        "CtrlC",
	compute.CtrlBreak:    "CtrlBreak",
	compute.CtrlShutdown: "CtrlShutdown",
	compute.CtrlClose:    "CtrlClose",
	compute.CtrlLogOff:   "CtrlLogOff",
}

// Signal is HcsSignalProcess: a console control event to the process.
func (p *process) Signal(ctx context.Context, s compute.Signal) error {
	name, ok := signalNames[s]
	if !ok {
		return invalid("process %d: %v is not a console control event", p.pid, s)
	}
	if err := p.exit.Check(); err != nil {
		return err
	}
	if err := p.hp.Signal(ctx, name); err != nil {
		return p.fail(fmt.Sprintf("send %v to", s), err)
	}
	return nil
}

// Kill is HcsTerminateProcess. HCS reports the exit by notification;
// when HCS says the process has already stopped, or the notification of
// the kill does not come, HCS is asked for the exit (watchExit).
func (p *process) Kill(ctx context.Context) error {
	if err := p.exit.Check(); err != nil {
		return err
	}
	if err := p.hp.Kill(ctx); err != nil {
		if f := p.sys.b.api.facts(err); f.AlreadyStopped || f.NotExist {
			_, _ = p.hp.CheckExited(ctx)
		}
		return p.fail("kill", err)
	}
	p.watchOnce.Do(func() { p.sys.b.background(p.watchExit) })
	return nil
}

// watchExit asks HCS for the exit of a killed process whose notification
// has not come within exitNoticeWait, exitChecks times at most: HCS can
// lose it, and the task would wait for ever. It ends with the exit, or
// with the process's Close.
func (p *process) watchExit() {
	logger := log.L.WithFields(log.Fields{"id": p.sys.id, "pid": p.pid})
	wait := p.sys.b.exitNoticeWait
	for range exitChecks {
		t := time.NewTimer(wait)
		select {
		case <-p.exit.Exited():
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		exited, err := p.hp.CheckExited(ctx)
		cancel()
		switch {
		case exited:
			logger.Warn("HCS reported no exit for a killed process; its properties say it exited")
			return
		case err != nil && p.sys.b.api.facts(err).AlreadyClosed:
			return
		case err != nil:
			logger.WithError(err).Debug("ask HCS for the exit of a killed process")
		}
	}
	logger.Warn("a killed process has not exited, as far as HCS says")
}

// Wait is closed once the process has exited and its output has been
// copied, or the drain timeout passed.
func (p *process) Wait() <-chan struct{} { return p.exit.Wait() }

// ExitCode is the exit code once Wait is closed.
func (p *process) ExitCode() (int, error) { return p.exit.ExitCode() }

// ResizeConsole is HcsModifyProcess with a console size.
func (p *process) ResizeConsole(ctx context.Context, width, height uint16) error {
	if err := p.exit.Check(); err != nil {
		return err
	}
	if !p.terminal {
		return fmt.Errorf("process %d has no console: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	if err := p.hp.ResizeConsole(ctx, width, height); err != nil {
		return p.fail("resize the console of", err)
	}
	return nil
}

// Close stops the copies and closes the process's pipes and its handle
// (HcsCloseProcess). It neither kills nor waits.
func (p *process) Close() error {
	if !p.exit.Close() {
		return nil
	}
	p.relay.CloseStdinPipe()
	p.relay.CloseOutput()
	if err := p.hp.Close(); err != nil && !p.sys.b.api.facts(err).AlreadyClosed {
		return p.fail("close", err)
	}
	return nil
}
