package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// coreProcess is a process handle. Its exit is the ProcessExited
// notification, or what its properties say when it exited before the
// callback was set.
type coreProcess struct {
	coreHandle
	c     *computeCore
	sysID string // the compute system's id, for Kill's handles
	pid   int
	code  int           // under mu, once exited
	pipes *processPipes // handed over once by Stdio; under mu

	// closing is closed by Close: it cancels the console events HCS still
	// holds.
	closing chan struct{}
}

func (c *computeCore) newProcess(ctx context.Context, sysID string, h hcsHandle, pipes processPipes) (*coreProcess, error) {
	p := &coreProcess{coreHandle: newCoreHandle(h), c: c, sysID: sysID, pid: int(pipes.pid), pipes: &pipes, closing: make(chan struct{})}
	p.key = hcsEvents.add(p.notify)
	if err := c.api.setProcessCallback(h, p.key); err != nil {
		hcsEvents.remove(p.key)
		closePipes(pipes)
		c.api.closeProcess(h)
		return nil, named("HcsSetProcessCallback", err)
	}
	// A process that exited before the callback was set has no
	// notification coming: its properties say so. A failed question
	// leaves the answer to the notification.
	_, _ = p.CheckExited(ctx)
	return p, nil
}

// CheckExited asks HCS whether the process has exited, for an exit whose
// notification may never come: a process HCS reports exited has its exit
// recorded, one HCS no longer finds its exit without a code.
func (p *coreProcess) CheckExited(ctx context.Context) (bool, error) {
	if p.hasExited() {
		return true, nil
	}
	doc, err := p.c.runOn(ctx, &p.coreHandle, "HcsGetProcessProperties", p.c.api.getProcessProperties)
	if err != nil {
		if f := coreFacts(err); f.AlreadyStopped || f.NotExist {
			p.exitWith(-1, errExitUnknown)
			return true, nil
		}
		return false, err
	}
	p.notifyStatus(doc)
	return p.hasExited(), nil
}

func (p *coreProcess) notify(t eventType, data string) {
	switch t {
	case eventProcessExited:
		p.notifyStatus(data)
	case eventServiceDisconnect:
		p.exitWith(-1, errServiceGone)
	}
}

func (p *coreProcess) exitWith(code int, err error) {
	p.exit(err, func() { p.code = code })
}

// notifyStatus reads a ProcessStatus document (the exit notification's
// data, or the process's properties). The exit code is the process's
// 32-bit exit status, unsigned as runhcs keeps it (internal/hcs/v2
// process.go waitBackground): a crash's NTSTATUS, 0xC0000005, is
// 3221225477 to containerd and the kubelet, not a negative number that
// would read as no exit code at all.
func (p *coreProcess) notifyStatus(doc string) {
	var st schema2.ProcessStatus
	if json.Unmarshal([]byte(doc), &st) != nil || !st.Exited {
		return
	}
	p.exitWith(int(st.ExitCode), nil)
}

func (p *coreProcess) Pid() int { return p.pid }

// Signal delivers a console control event (schema2 SignalProcessOptions).
func (p *coreProcess) Signal(ctx context.Context, signal string) error {
	b, err := json.Marshal(schema2.SignalProcessOptions{Signal: signal})
	if err != nil {
		return err
	}
	if p.hasExited() {
		return errAlreadyExited
	}
	// The operation runs under a context of its own: the caller's ends
	// it only while the caller waits; past signalWait only Close does.
	opCtx, cancel := context.WithCancelCause(context.Background())
	result := make(chan error, 1)
	go func() {
		_, err := p.c.runOn(opCtx, &p.coreHandle, "HcsSignalProcess", func(h, op hcsHandle) error {
			return p.c.api.signalProcess(h, op, string(b))
		})
		result <- err
	}()
	wait := p.c.signalWait
	if wait <= 0 {
		wait = defaultSignalWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-result:
		cancel(nil)
		return err
	case <-ctx.Done():
		cancel(ctx.Err())
		return <-result
	case <-t.C:
	}
	// Delivered, as far as the caller is concerned; its end comes with
	// the process's exit, or Close cancels it.
	p.c.bg.Add(1)
	go func() {
		defer p.c.bg.Done()
		defer cancel(nil)
		var err error
		select {
		case err = <-result:
		case <-p.closing:
			cancel(errHandleClosed)
			err = <-result
		}
		if f := coreFacts(err); err != nil && !f.AlreadyStopped && !f.AlreadyClosed {
			log.L.WithError(err).WithFields(log.Fields{"pid": p.pid, "signal": signal}).Warn("a console event HCS held failed")
		}
	}()
	return nil
}

// Kill terminates the process through handles of its own. HCS
// serializes the calls on one process handle, so a terminate sent on the
// handle that carries a console event HCS still holds (a servercore
// process whose handler does not return, with WaitToKillServiceTimeout at
// its maximum) would wait behind it for ever, and the pod would never
// finish terminating. runhcs does the same (hcsshim internal/hcs/v2
// process.go Kill, hcsshim#1416). HCS reports the exit by notification.
func (p *coreProcess) Kill(ctx context.Context) error {
	if _, err := p.handle(); err != nil {
		return err
	}
	if p.hasExited() {
		return errAlreadyExited
	}
	sys, err := p.c.api.openComputeSystem(p.sysID)
	if err != nil {
		err = named("HcsOpenComputeSystem", err)
		if coreFacts(err).NotExist {
			// The system is gone, and its processes with it.
			return fmt.Errorf("terminate process %d: its compute system %s: %w: %w", p.pid, p.sysID, err, errAlreadyExited)
		}
		// Better a terminate that may queue than none.
		log.G(ctx).WithError(err).WithFields(log.Fields{"id": p.sysID, "pid": p.pid}).Warn("open a second handle to terminate a process; terminating through its own")
		return p.use(func(h hcsHandle) error {
			return p.c.submit("HcsTerminateProcess", func(op hcsHandle) error { return p.c.api.terminateProcess(h, op) })
		})
	}
	ph, err := p.c.api.openProcess(sys, uint32(p.pid))
	if err != nil {
		p.c.api.closeComputeSystem(sys)
		return fmt.Errorf("open process %d of %s to terminate it: %w", p.pid, p.sysID, named("HcsOpenProcess", err))
	}
	return p.c.runWith(ctx, "HcsTerminateProcess", func(op hcsHandle) error { return p.c.api.terminateProcess(ph, op) }, p.c.waitResult, func(error, bool) {
		p.c.api.closeProcess(ph)
		p.c.api.closeComputeSystem(sys)
	})
}

// Wait returns once the process has exited (nil, or errServiceGone when
// HCS went away first), or errHandleClosed once the handle was closed
// first.
func (p *coreProcess) Wait() error { return p.wait() }

// ExitCode is the exit code once Wait returned nil.
func (p *coreProcess) ExitCode() (int, error) {
	if !p.hasExited() {
		return -1, fmt.Errorf("process %d has not exited: %w", p.pid, errHandleClosed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.code, p.exitErr
}

// ResizeConsole resizes the process's pseudo console.
func (p *coreProcess) ResizeConsole(ctx context.Context, width, height uint16) error {
	return p.modify(ctx, schema2.ProcessModifyRequest{Operation: schema2.OperationConsoleSize, ConsoleSize: &schema2.ConsoleSize{Height: height, Width: width}})
}

// CloseStdin tells HCS to close the process's stdin, so it reads EOF.
func (p *coreProcess) CloseStdin(ctx context.Context) error {
	return p.modify(ctx, schema2.ProcessModifyRequest{Operation: schema2.OperationCloseHandle, CloseHandle: &schema2.CloseHandle{Handle: "StdIn"}})
}

func (p *coreProcess) modify(ctx context.Context, req schema2.ProcessModifyRequest) error {
	if p.hasExited() {
		return errAlreadyExited
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = p.c.runOn(ctx, &p.coreHandle, "HcsModifyProcess", func(h, op hcsHandle) error {
		return p.c.api.modifyProcess(h, op, string(b))
	})
	return err
}

// Stdio hands over the pipes, once.
func (p *coreProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pipes == nil {
		return nil, nil, nil, fmt.Errorf("the pipes of process %d were already taken", p.pid)
	}
	pp := p.pipes
	p.pipes = nil
	return pp.stdin, pp.stdout, pp.stderr, nil
}

// Close closes the handle once HCS is done with the calls on it, cancels
// the console events HCS still holds, and closes the pipes nobody took.
func (p *coreProcess) Close() error {
	if err := p.closeWith(p.c.api.closeProcess); err != nil {
		return err
	}
	p.mu.Lock()
	pipes := p.pipes
	p.pipes = nil
	p.mu.Unlock()
	if pipes != nil {
		closePipes(*pipes)
	}
	close(p.closing)
	return nil
}

func closePipes(pp processPipes) {
	for _, c := range []io.Closer{pp.stdin, pp.stdout, pp.stderr} {
		if c != nil {
			c.Close()
		}
	}
}
