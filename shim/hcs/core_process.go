package hcs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
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

	// signals counts the console events HCS has not finished with; Close
	// cancels them (closing) and waits for them before the handle goes.
	signals sync.WaitGroup
	closing chan struct{}
}

func (c *computeCore) newProcess(ctx context.Context, sysID string, h hcsHandle, pipes processPipes) (*coreProcess, error) {
	p := &coreProcess{coreHandle: newCoreHandle(h), c: c, sysID: sysID, pid: int(pipes.pid), pipes: &pipes, closing: make(chan struct{})}
	p.key = hcsEvents.add(p.notify)
	if err := c.api.setProcessCallback(h, p.key); err != nil {
		hcsEvents.remove(p.key)
		closePipes(pipes)
		c.api.closeProcess(h)
		return nil, err
	}
	// A process that exited before the callback was set has no
	// notification coming: its properties say so.
	doc, err := c.run(ctx, func(op hcsHandle) error { return c.api.getProcessProperties(h, op) })
	if err == nil {
		p.notifyStatus(doc)
	}
	return p, nil
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
	// The handle stays open until this signal is done with: Close waits
	// for the count taken while the handle was in use.
	var op hcsHandle
	if err := p.use(func(h hcsHandle) error {
		var err error
		op, err = p.c.begin(func(op hcsHandle) error { return p.c.api.signalProcess(h, op, string(b)) })
		if err == nil {
			p.signals.Add(1)
		}
		return err
	}); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		doc, err := p.c.api.waitOperation(op, infiniteTimeout)
		done <- withResult(err, doc)
	}()
	finish := func(cancel bool) error {
		if cancel {
			_ = p.c.api.cancelOperation(op)
		}
		err := <-done
		p.c.api.closeOperation(op)
		p.signals.Done()
		return err
	}
	wait := p.c.signalWait
	if wait <= 0 {
		wait = defaultSignalWait
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		done <- err
		return finish(false)
	case <-ctx.Done():
		if err := finish(true); err != nil {
			return ctx.Err()
		}
		return nil
	case <-t.C:
	}
	// Delivered, as far as the caller is concerned; its end comes with
	// the process's exit, or Close cancels it.
	go func() {
		var err error
		select {
		case err = <-done:
			done <- err
			err = finish(false)
		case <-p.closing:
			err = finish(true)
		}
		if err != nil && !coreFacts(err).AlreadyStopped {
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
		if coreFacts(err).NotExist {
			// The system is gone, and its processes with it.
			return fmt.Errorf("terminate process %d: its compute system %s: %w: %w", p.pid, p.sysID, err, errAlreadyExited)
		}
		// Better a terminate that may queue than none.
		log.G(ctx).WithError(err).WithFields(log.Fields{"id": p.sysID, "pid": p.pid}).Warn("open a second handle to terminate a process; terminating through its own")
		return p.use(func(h hcsHandle) error {
			return p.c.submit(func(op hcsHandle) error { return p.c.api.terminateProcess(h, op) })
		})
	}
	defer p.c.api.closeComputeSystem(sys)
	ph, err := p.c.api.openProcess(sys, uint32(p.pid))
	if err != nil {
		return fmt.Errorf("open process %d of %s to terminate it: %w", p.pid, p.sysID, err)
	}
	defer p.c.api.closeProcess(ph)
	_, err = p.c.run(ctx, func(op hcsHandle) error { return p.c.api.terminateProcess(ph, op) })
	return err
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
	return p.use(func(h hcsHandle) error {
		_, err := p.c.run(ctx, func(op hcsHandle) error { return p.c.api.modifyProcess(h, op, string(b)) })
		return err
	})
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

// Close closes the handle once no call uses it and HCS is done with its
// console events, and the pipes nobody took.
func (p *coreProcess) Close() error {
	h, err := p.take()
	if err != nil {
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
	p.signals.Wait()
	p.c.api.closeProcess(h)
	p.closed()
	return nil
}

func closePipes(pp processPipes) {
	for _, c := range []io.Closer{pp.stdin, pp.stdout, pp.stderr} {
		if c != nil {
			c.Close()
		}
	}
}
