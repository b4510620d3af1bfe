// Package process is the state of one process of a task: a container's init
// process or an exec. It owns the transitions containerd sees (created →
// running → stopped, then deleted), the exit record, the stdio wiring to
// containerd, and how containerd's signals become Windows console events.
//
// A Process talks to its compute system only through package compute, so the
// same code runs over HCS and over the Linux emulation, and its tests use a
// fake of that seam.
package process

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
)

// Stdio names containerd's ends of a process's standard streams: fifos on
// Linux, named pipes on Windows; or, in Stdout and Stderr alike, a log URI
// (binary:// or file://, see loguri.go). Empty names are not connected.
type Stdio struct {
	Stdin, Stdout, Stderr string
	Terminal              bool
}

// connected is the streams the shim connects: a console has a single
// output stream, so with Terminal a stderr path is ignored (containerd's
// Linux cio names a stderr fifo for terminals too; runc's shim ignores it
// as well).
func (s Stdio) connected() Stdio {
	if s.Terminal {
		s.Stderr = ""
	}
	return s
}

// State is a snapshot of a process for containerd's State call.
type State struct {
	ID         string
	Pid        uint32
	Status     task.Status
	Stdio      Stdio
	ExitStatus uint32
	ExitedAt   time.Time
}

// ExitHook runs when the process has exited and before its exit becomes
// final, that is before Wait returns: the init process tears its compute
// system down there. It returns the exit status to record.
type ExitHook func(ctx context.Context, p *Process, status uint32) uint32

// Hooks are what a process calls back into; each may be nil.
type Hooks struct {
	// OnExit runs first when the process has exited (ExitHook).
	OnExit ExitHook
	// Notify gets the process's final state once its exit is recorded and
	// before Wait returns: containerd must see the exit event before
	// anything a Wait lets happen next (a Delete's event).
	Notify func(context.Context, State)
}

// Process is one init or exec process.
type Process struct {
	id       string
	stdio    Stdio
	settings *compute.ProcessSettings
	hooks    Hooks

	mu       sync.Mutex
	status   task.Status
	proc     compute.Process
	pid      uint32
	exit     uint32
	exitedAt time.Time
	streams  *streams
	// stdinDone records a CloseIO: the client has written all its input.
	stdinDone bool
	done      chan struct{} // closed when the exit is final
}

// New returns a created process. id is the exec ID, or the container ID for
// the init process.
func New(id string, settings *compute.ProcessSettings, stdio Stdio, hooks Hooks) *Process {
	return &Process{
		id:       id,
		stdio:    stdio,
		settings: settings,
		hooks:    hooks,
		status:   task.Status_CREATED,
		done:     make(chan struct{}),
	}
}

// ID returns the process's ID.
func (p *Process) ID() string { return p.id }

// State returns the process's current state.
func (p *Process) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return State{ID: p.id, Pid: p.pid, Status: p.status, Stdio: p.stdio, ExitStatus: p.exit, ExitedAt: p.exitedAt}
}

// Connect opens the shim's ends of the process's stdio, once; Start
// connects a process that is not connected yet. The task service connects
// an init process at task create, before its compute system is made, as
// runhcs and containerd's runc shim do: a stdio problem fails the create,
// and the process's first output has somewhere to go.
func (p *Process) Connect(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != task.Status_CREATED {
		return fmt.Errorf("process %s is %s, only a created process connects its stdio: %w", p.id, statusName(p.status), errdefs.ErrFailedPrecondition)
	}
	return p.connectLocked(ctx)
}

func (p *Process) connectLocked(ctx context.Context) error {
	if p.streams != nil {
		return nil
	}
	s, err := openStdio(ctx, p.id, p.stdio.connected())
	if err != nil {
		return fmt.Errorf("connect stdio of process %s: %w", p.id, err)
	}
	p.streams = s
	return nil
}

// Abandon releases a created process that will never start (its compute
// system could not be made): it closes its stdio and runs no hook.
func (p *Process) Abandon() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != task.Status_CREATED {
		return
	}
	if p.streams != nil {
		p.streams.Close()
		p.streams = nil
	}
	p.status = task.Status_STOPPED
}

// Start connects containerd's stdio, if Connect did not, and starts the
// process in sys.
func (p *Process) Start(ctx context.Context, sys compute.System) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != task.Status_CREATED {
		return fmt.Errorf("process %s is %s, only a created process can start: %w", p.id, statusName(p.status), errdefs.ErrFailedPrecondition)
	}
	if err := p.connectLocked(ctx); err != nil {
		return err
	}
	s := p.streams
	if p.stdinDone {
		// CloseIO came before the start: the client is done already.
		s.closeStdinWriter()
	}
	settings := *p.settings
	settings.Stdin, settings.Stdout, settings.Stderr = s.stdin, s.stdout, s.stderr
	proc, err := sys.CreateProcess(ctx, &settings)
	if err != nil {
		// The process stays created; a later Start connects again.
		s.Close()
		p.streams = nil
		return fmt.Errorf("start process %s: %w", p.id, err)
	}
	p.proc = proc
	p.pid = uint32(proc.Pid())
	p.status = task.Status_RUNNING
	go p.waitExit(context.WithoutCancel(ctx))
	return nil
}

// waitExit owns the running process: it ends when the process has exited
// and its exit is recorded.
func (p *Process) waitExit(ctx context.Context) {
	<-p.proc.Wait()
	code, err := p.proc.ExitCode()
	if err != nil {
		log.G(ctx).WithError(err).WithField("process", p.id).Warn("read exit code")
		code = 255
	}
	p.finish(ctx, uint32(code))
}

// finish runs the exit hook and makes the exit final. It is called once:
// by waitExit, or by Kill of a process that never started.
func (p *Process) finish(ctx context.Context, status uint32) {
	if p.hooks.OnExit != nil {
		status = p.hooks.OnExit(ctx, p, status)
	}
	p.mu.Lock()
	if p.proc != nil {
		p.proc.Close()
	}
	if p.streams != nil {
		p.streams.Close()
	}
	p.status = task.Status_STOPPED
	p.exit = status
	p.exitedAt = time.Now()
	st := State{ID: p.id, Pid: p.pid, Status: p.status, Stdio: p.stdio, ExitStatus: p.exit, ExitedAt: p.exitedAt}
	p.mu.Unlock()
	if p.hooks.Notify != nil {
		p.hooks.Notify(ctx, st)
	}
	close(p.done)
}

// Wait waits until the exit is final and returns it.
func (p *Process) Wait(ctx context.Context) (uint32, time.Time, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, time.Time{}, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.exitedAt, nil
}

// Kill delivers signal the way runhcs does (windowsSignal): a console
// event, or SIGKILL's termination; other signals mean nothing to a
// Windows process and are refused. A process that never started is simply
// marked stopped (exit status 1, as runhcs).
func (p *Process) Kill(ctx context.Context, signal uint32) error {
	event, terminate, err := windowsSignal(signal)
	if err != nil {
		return err
	}
	p.mu.Lock()
	status, proc := p.status, p.proc
	p.mu.Unlock()
	switch status {
	case task.Status_CREATED:
		p.mu.Lock()
		if p.status != task.Status_CREATED {
			p.mu.Unlock()
			return p.Kill(ctx, signal)
		}
		p.status = task.Status_STOPPED // no second finish
		p.mu.Unlock()
		p.finish(ctx, 1)
		return nil
	case task.Status_RUNNING:
	default:
		return fmt.Errorf("process %s has already exited: %w", p.id, errdefs.ErrNotFound)
	}
	if terminate {
		return proc.Kill(ctx)
	}
	if err := proc.Signal(ctx, event); err != nil {
		return fmt.Errorf("send %s to process %s: %w", event, p.id, err)
	}
	return nil
}

// windowsSignal reads containerd's signal numbers as runhcs does (hcsshim
// internal/signals ValidateWCOW), so an image's stop signal or a client's
// kill means on winproc what it meant on runhcs: the numbers below 9 are
// Windows's own console events by their CTRL_*_EVENT values (so 2, which
// is SIGINT to a POSIX client, is CTRL_CLOSE), 15 (SIGTERM) is
// CTRL_SHUTDOWN and 9 (SIGKILL) terminates.
func windowsSignal(signal uint32) (compute.Signal, bool, error) {
	switch signal {
	case 0:
		return compute.CtrlC, false, nil
	case 1:
		return compute.CtrlBreak, false, nil
	case 2:
		return compute.CtrlClose, false, nil
	case 5:
		return compute.CtrlLogOff, false, nil
	case 6, uint32(syscall.SIGTERM):
		return compute.CtrlShutdown, false, nil
	case uint32(syscall.SIGKILL):
		return 0, true, nil
	}
	return 0, false, fmt.Errorf("signal %d has no meaning for a Windows process; use 15 (SIGTERM: CTRL_SHUTDOWN), 9 (SIGKILL: terminate), or a console event by its Windows number (0 CTRL_C, 1 CTRL_BREAK, 2 CTRL_CLOSE, 5 CTRL_LOGOFF, 6 CTRL_SHUTDOWN): %w", signal, errdefs.ErrFailedPrecondition)
}

// ResizeConsole resizes the pseudo console of a running process.
func (p *Process) ResizeConsole(ctx context.Context, width, height uint32) error {
	proc, err := p.running()
	if err != nil {
		return err
	}
	if !p.stdio.Terminal {
		return fmt.Errorf("process %s has no console to resize: %w", p.id, errdefs.ErrFailedPrecondition)
	}
	return proc.ResizeConsole(ctx, uint16(width), uint16(height))
}

// CloseStdin is CloseIO: the client has written all its input. The
// process still reads every byte written before it, then EOF: the shim's
// own end of a stdin fifo closes, so the backend's copy reaches EOF once
// the buffered bytes are read, and the backend then closes the process's
// stdin (the compute seam's contract). Closing the process's stdin here
// instead would drop what the copy has not read yet. Before Start the
// close is remembered; after the exit there is nothing left to close, which
// is no error (a client's CloseIO races the exit of a process that did not
// read its input; runc's shim and runhcs accept it too).
func (p *Process) CloseStdin(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.status {
	case task.Status_CREATED:
		p.stdinDone = true
	case task.Status_RUNNING:
		p.streams.closeStdinWriter()
	}
	return nil
}

func (p *Process) running() (compute.Process, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status != task.Status_RUNNING {
		return nil, fmt.Errorf("process %s is %s, not running: %w", p.id, statusName(p.status), errdefs.ErrFailedPrecondition)
	}
	return p.proc, nil
}

// CheckDeletable refuses to delete a process that is still running.
func (p *Process) CheckDeletable() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == task.Status_RUNNING {
		return fmt.Errorf("process %s is running; kill it before deleting it: %w", p.id, errdefs.ErrFailedPrecondition)
	}
	return nil
}

func statusName(s task.Status) string {
	switch s {
	case task.Status_CREATED:
		return "created"
	case task.Status_RUNNING:
		return "running"
	case task.Status_STOPPED:
		return "stopped"
	}
	return s.String()
}
