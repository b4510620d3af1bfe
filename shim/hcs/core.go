package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// computeCore calls HCS through a binding: it runs operations to their
// end, turns notifications into waits, and reads HCS's errors. Its systems
// and processes are the hcsContainer and hcsProcess the backend uses. It
// is portable, and tested against a fake binding (core_test.go).
type computeCore struct {
	api binding
	// signalWait bounds how long Signal waits for HCS to carry out a
	// console event (defaultSignalWait; shortened by tests).
	signalWait time.Duration
}

// defaultSignalWait: a servercore image's process can hold a console
// event's call until it exits (runhcs signals WCOW processes in the
// background for that, hcsshim bug 36689012); past this wait the event
// counts as delivered and its end is awaited in the background.
const defaultSignalWait = time.Second

// Errors of handles the core has closed, and of HCS going away.
var (
	errHandleClosed  = errors.New("the HCS handle has been closed")
	errServiceGone   = errors.New("the Host Compute Service disconnected")
	errAlreadyExited = errors.New("the process has already exited")
)

// coreFacts reads the core's own errors and HCS's HRESULTs.
func coreFacts(err error) errFacts {
	f := errnoFacts(err)
	f.AlreadyClosed = f.AlreadyClosed || errors.Is(err, errHandleClosed)
	f.Unavailable = f.Unavailable || errors.Is(err, errServiceGone)
	f.AlreadyStopped = f.AlreadyStopped || errors.Is(err, errAlreadyExited)
	return f
}

// resultError is a failed operation with what HCS said about it in its
// result document.
type resultError struct {
	err    error
	detail string
}

func (e *resultError) Error() string { return e.err.Error() + ": " + e.detail }
func (e *resultError) Unwrap() error { return e.err }

// withResult adds the messages of an HCS result document to err.
func withResult(err error, doc string) error {
	if err == nil || doc == "" {
		return err
	}
	var r struct {
		ErrorMessage string
		ErrorEvents  []struct{ Message string }
	}
	if json.Unmarshal([]byte(doc), &r) != nil {
		return err
	}
	msgs := []string{}
	if r.ErrorMessage != "" {
		msgs = append(msgs, r.ErrorMessage)
	}
	for _, e := range r.ErrorEvents {
		if e.Message != "" {
			msgs = append(msgs, e.Message)
		}
	}
	if len(msgs) == 0 {
		return err
	}
	return &resultError{err: err, detail: strings.Join(msgs, "; ")}
}

// run carries out one HCS operation: start submits it, and run waits for
// its result. When ctx ends first the operation is cancelled, and run still
// waits for HCS to finish with it before closing it; the waiting goroutine
// ends before run returns.
func (c *computeCore) run(ctx context.Context, start func(op hcsHandle) error) (string, error) {
	var doc string
	err := c.runWith(ctx, start, func(op hcsHandle) error {
		var err error
		doc, err = c.api.waitOperation(op, infiniteTimeout)
		return withResult(err, doc)
	})
	return doc, err
}

// runWith is run with the wait given: waitOperation, or
// waitOperationProcess for a created process.
func (c *computeCore) runWith(ctx context.Context, start, wait func(op hcsHandle) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op, err := c.begin(start)
	if err != nil {
		return err
	}
	defer c.api.closeOperation(op)
	done := make(chan error, 1)
	go func() { done <- wait(op) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// A cancelled operation still completes; only then may its handle
		// close. A failed cancel means it was completing anyway.
		_ = c.api.cancelOperation(op)
		if err := <-done; err == nil {
			return nil
		}
		return ctx.Err()
	}
}

// submit starts an operation and does not wait for its result: what HCS
// accepted goes on after the handle is closed (Shutdown and Terminate,
// whose end is the system's exit notification).
func (c *computeCore) submit(start func(op hcsHandle) error) error {
	op, err := c.begin(start)
	if err != nil {
		return err
	}
	c.api.closeOperation(op)
	return nil
}

// begin creates an operation and starts it with start. When start fails,
// the operation is closed and the error carries HCS's detail.
func (c *computeCore) begin(start func(op hcsHandle) error) (hcsHandle, error) {
	op, err := c.api.createOperation()
	if err != nil {
		return 0, err
	}
	if err := start(op); err != nil {
		doc, _ := c.api.operationResult(op)
		c.api.closeOperation(op)
		return 0, withResult(err, doc)
	}
	return op, nil
}

// createContainer creates the compute system id from doc. A system made
// but failing afterwards is terminated and closed again.
func (c *computeCore) createContainer(ctx context.Context, id string, doc *schema2.ComputeSystem) (hcsContainer, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var h hcsHandle
	if _, err := c.run(ctx, func(op hcsHandle) error {
		var err error
		h, err = c.api.createComputeSystem(id, string(b), op)
		return err
	}); err != nil {
		if h != 0 {
			c.api.closeComputeSystem(h)
		}
		return nil, err
	}
	s, err := c.newSystem(id, h)
	if err != nil {
		_ = c.submit(func(op hcsHandle) error { return c.api.terminateComputeSystem(h, op) })
		c.api.closeComputeSystem(h)
		return nil, err
	}
	return s, nil
}

// openContainer opens the existing compute system id.
func (c *computeCore) openContainer(ctx context.Context, id string) (hcsContainer, error) {
	h, err := c.api.openComputeSystem(id)
	if err != nil {
		return nil, err
	}
	s, err := c.newSystem(id, h)
	if err != nil {
		c.api.closeComputeSystem(h)
		return nil, err
	}
	// A system that stopped before the callback was set sent its exit
	// notification to no one: ask.
	var props schema2.Properties
	doc, err := c.run(ctx, func(op hcsHandle) error { return c.api.getComputeSystemProperties(h, op, "") })
	if err == nil && json.Unmarshal([]byte(doc), &props) == nil && (props.Stopped || props.State == "Stopped") {
		s.exit(nil, nil)
	}
	return s, nil
}

// addCredentialGuard makes the Container Credential Guard instance of
// container id for a gMSA credential spec, as runhcs (hcsshim
// internal/credentials CreateCredentialGuard): an AddInstance service
// setting, then the instance's state from the service's properties.
func (c *computeCore) addCredentialGuard(id, spec string) (*schema2.ContainerCredentialGuardState, error) {
	req := schema2.ModificationRequest{
		PropertyType: schema2.PropertyContainerCredentialGuard,
		Settings: schema2.ContainerCredentialGuardOperationRequest{
			Operation:        schema2.AddInstance,
			OperationDetails: schema2.ContainerCredentialGuardAddInstanceRequest{Id: id, CredentialSpec: spec, Transport: "LRPC"},
		},
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if err := c.api.modifyServiceSettings(string(b)); err != nil {
		return nil, err
	}
	q, _ := json.Marshal(schema2.PropertyQuery{PropertyTypes: []string{schema2.PropertyContainerCredentialGuard}})
	doc, err := c.api.getServiceProperties(string(q))
	if err == nil {
		var props schema2.ServiceProperties
		var info schema2.ContainerCredentialGuardSystemInfo
		switch {
		case json.Unmarshal([]byte(doc), &props) != nil || len(props.Properties) != 1:
			err = fmt.Errorf("HCS answered %q for the Container Credential Guard instances", doc)
		case json.Unmarshal(props.Properties[0], &info) != nil:
			err = fmt.Errorf("HCS answered %q for the Container Credential Guard instances", props.Properties[0])
		default:
			for _, in := range info.Instances {
				if in.Id == id && in.CredentialGuard != nil {
					return in.CredentialGuard, nil
				}
			}
			err = fmt.Errorf("HCS lists no Container Credential Guard instance for %s after adding it", id)
		}
	}
	if rerr := c.removeCredentialGuard(id); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return nil, err
}

// removeCredentialGuard removes the instance of container id.
func (c *computeCore) removeCredentialGuard(id string) error {
	b, err := json.Marshal(schema2.ModificationRequest{
		PropertyType: schema2.PropertyContainerCredentialGuard,
		Settings: schema2.ContainerCredentialGuardOperationRequest{
			Operation:        schema2.RemoveInstance,
			OperationDetails: schema2.ContainerCredentialGuardRemoveInstanceRequest{Id: id},
		},
	})
	if err != nil {
		return err
	}
	return c.api.modifyServiceSettings(string(b))
}

// coreHandle is what a system's and a process's handle share: the handle
// until Close, the listener of its notifications, and its exit once known.
type coreHandle struct {
	key      uintptr
	exited   chan struct{} // closed once the exit is known
	closedCh chan struct{} // closed by Close

	mu      sync.Mutex
	h       hcsHandle // 0 once closed
	exitErr error
	once    sync.Once
}

func newCoreHandle(h hcsHandle) coreHandle {
	return coreHandle{h: h, exited: make(chan struct{}), closedCh: make(chan struct{})}
}

// handle is the open handle, or errHandleClosed.
func (c *coreHandle) handle() (hcsHandle, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return 0, errHandleClosed
	}
	return c.h, nil
}

// exit records the exit, once; record runs under the lock.
func (c *coreHandle) exit(err error, record func()) {
	c.once.Do(func() {
		c.mu.Lock()
		c.exitErr = err
		if record != nil {
			record()
		}
		c.mu.Unlock()
		close(c.exited)
	})
}

func (c *coreHandle) hasExited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// wait returns once the exit is known (nil, or why it failed), or
// errHandleClosed once the handle was closed first.
func (c *coreHandle) wait() error {
	select {
	case <-c.exited:
	case <-c.closedCh:
		if !c.hasExited() {
			return errHandleClosed
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exitErr
}

// take takes the handle for closing, and stops the notifications; the
// caller closes it, then calls closed.
func (c *coreHandle) take() (hcsHandle, error) {
	c.mu.Lock()
	h := c.h
	c.h = 0
	c.mu.Unlock()
	if h == 0 {
		return 0, errHandleClosed
	}
	hcsEvents.remove(c.key)
	return h, nil
}

func (c *coreHandle) closed() { close(c.closedCh) }

// coreSystem is a compute system handle. Its exit is the SystemExited
// notification (or HCS disconnecting); Close ends Wait with
// errHandleClosed if the system has not exited.
type coreSystem struct {
	coreHandle
	c  *computeCore
	id string
}

func (c *computeCore) newSystem(id string, h hcsHandle) (*coreSystem, error) {
	s := &coreSystem{coreHandle: newCoreHandle(h), c: c, id: id}
	s.key = hcsEvents.add(s.notify)
	if err := c.api.setComputeSystemCallback(h, s.key); err != nil {
		hcsEvents.remove(s.key)
		return nil, err
	}
	return s, nil
}

// notify receives the system's notifications, on HCS's thread.
func (s *coreSystem) notify(t eventType, data string) {
	switch t {
	case eventSystemExited:
		var st schema2.SystemExitStatus
		_ = json.Unmarshal([]byte(data), &st)
		var err error
		if st.Status != 0 {
			err = syscall.Errno(uint32(st.Status))
		}
		s.exit(err, nil)
	case eventServiceDisconnect:
		s.exit(errServiceGone, nil)
	}
}

func (s *coreSystem) Start(ctx context.Context) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	_, err = s.c.run(ctx, func(op hcsHandle) error { return s.c.api.startComputeSystem(h, op) })
	return err
}

func (s *coreSystem) Shutdown(ctx context.Context) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	return s.c.submit(func(op hcsHandle) error { return s.c.api.shutDownComputeSystem(h, op) })
}

func (s *coreSystem) Terminate(ctx context.Context) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	return s.c.submit(func(op hcsHandle) error { return s.c.api.terminateComputeSystem(h, op) })
}

// Wait returns once the system has exited (nil, or why it failed), or
// once the handle was closed (errHandleClosed).
func (s *coreSystem) Wait() error { return s.wait() }

// Properties queries the property types asked for.
func (s *coreSystem) Properties(ctx context.Context, types ...string) (*schema2.Properties, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	q, err := json.Marshal(schema2.PropertyQuery{PropertyTypes: types})
	if err != nil {
		return nil, err
	}
	doc, err := s.c.run(ctx, func(op hcsHandle) error { return s.c.api.getComputeSystemProperties(h, op, string(q)) })
	if err != nil {
		return nil, err
	}
	var p schema2.Properties
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return nil, fmt.Errorf("HCS's properties of %s: %w", s.id, err)
	}
	return &p, nil
}

// Modify sends a modify request.
func (s *coreSystem) Modify(ctx context.Context, req *schema2.ModifySettingRequest) error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = s.c.run(ctx, func(op hcsHandle) error { return s.c.api.modifyComputeSystem(h, op, string(b)) })
	return err
}

// SetAffinity pins the silo's processors.
func (s *coreSystem) SetAffinity(a []groupAffinity) error {
	if _, err := s.handle(); err != nil {
		return err
	}
	return s.c.api.setSiloAffinity(s.id, a)
}

// CreateProcess starts a process, takes its pipes, and follows its exit.
func (s *coreSystem) CreateProcess(ctx context.Context, params *schema2.ProcessParameters) (hcsProcess, error) {
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var ph hcsHandle
	var pipes processPipes
	err = s.c.runWith(ctx, func(op hcsHandle) error {
		var err error
		ph, err = s.c.api.createProcess(h, string(b), op)
		return err
	}, func(op hcsHandle) error {
		var doc string
		var err error
		pipes, doc, err = s.c.api.waitOperationProcess(op, infiniteTimeout)
		return withResult(err, doc)
	})
	if err != nil {
		closePipes(pipes)
		if ph != 0 {
			// HCS may have started it: without its pipes it is of no use.
			_ = s.c.submit(func(op hcsHandle) error { return s.c.api.terminateProcess(ph, op) })
			s.c.api.closeProcess(ph)
		}
		return nil, err
	}
	return s.c.newProcess(ctx, ph, pipes)
}

// Close closes the handle; Wait then returns errHandleClosed unless the
// system had exited.
func (s *coreSystem) Close() error {
	h, err := s.take()
	if err != nil {
		return err
	}
	s.c.api.closeComputeSystem(h)
	s.closed()
	return nil
}

// coreProcess is a process handle. Its exit is the ProcessExited
// notification, or what its properties say when it exited before the
// callback was set.
type coreProcess struct {
	coreHandle
	c     *computeCore
	pid   int
	code  int           // under mu, once exited
	pipes *processPipes // handed over once by Stdio; under mu

	// signals counts the console events HCS has not finished with; Close
	// cancels them (closing) and waits for them before the handle goes.
	signals sync.WaitGroup
	closing chan struct{}
}

func (c *computeCore) newProcess(ctx context.Context, h hcsHandle, pipes processPipes) (*coreProcess, error) {
	p := &coreProcess{coreHandle: newCoreHandle(h), c: c, pid: int(pipes.pid), pipes: &pipes, closing: make(chan struct{})}
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
// data, or the process's properties).
func (p *coreProcess) notifyStatus(doc string) {
	var st schema2.ProcessStatus
	if json.Unmarshal([]byte(doc), &st) != nil || !st.Exited {
		return
	}
	p.exitWith(int(int32(st.ExitCode)), nil)
}

func (p *coreProcess) Pid() int { return p.pid }

// Signal delivers a console control event (schema2 SignalProcessOptions).
func (p *coreProcess) Signal(ctx context.Context, signal string) error {
	b, err := json.Marshal(schema2.SignalProcessOptions{Signal: signal})
	if err != nil {
		return err
	}
	// The handle stays open until this signal is done with: Close waits.
	p.mu.Lock()
	h := p.h
	if h != 0 {
		p.signals.Add(1)
	}
	p.mu.Unlock()
	if h == 0 {
		return errHandleClosed
	}
	if p.hasExited() {
		p.signals.Done()
		return errAlreadyExited
	}
	op, err := p.c.begin(func(op hcsHandle) error { return p.c.api.signalProcess(h, op, string(b)) })
	if err != nil {
		p.signals.Done()
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

// Kill terminates the process; HCS reports the exit by notification.
func (p *coreProcess) Kill(ctx context.Context) error {
	h, err := p.handle()
	if err != nil {
		return err
	}
	if p.hasExited() {
		return errAlreadyExited
	}
	return p.c.submit(func(op hcsHandle) error { return p.c.api.terminateProcess(h, op) })
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
	h, err := p.handle()
	if err != nil {
		return err
	}
	if p.hasExited() {
		return errAlreadyExited
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	_, err = p.c.run(ctx, func(op hcsHandle) error { return p.c.api.modifyProcess(h, op, string(b)) })
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

// Close closes the handle, and the pipes nobody took.
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
