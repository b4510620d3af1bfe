package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	// bg counts the core's goroutines that outlive their caller: waits
	// for operations left to HCS (runWith, counted by nLeft too) and for
	// console events past signalWait.
	bg    sync.WaitGroup
	nLeft atomic.Int64
}

// defaultSignalWait: a servercore image's process can hold a console
// event's call until it exits (runhcs signals WCOW processes in the
// background for that, hcsshim bug 36689012); past this wait the event
// counts as delivered and its end is awaited in the background.
const defaultSignalWait = time.Second

// cancelGrace is how long a cancelled operation has to end before it is
// left to HCS: its caller returns at its deadline, not when HCS pleases.
const cancelGrace = 20 * time.Millisecond

// Errors of handles the core has closed, and of HCS going away.
var (
	errHandleClosed  = errors.New("the HCS handle has been closed")
	errServiceGone   = errors.New("the Host Compute Service disconnected")
	errAlreadyExited = errors.New("the process has already exited")
	errExitUnknown   = errors.New("HCS reports the process gone, without its exit code")
	// errOperationLeft: the caller's context ended, and HCS did not end
	// the cancelled operation (runWith).
	errOperationLeft = errors.New("HCS did not end the cancelled operation; it is left to HCS")
)

// coreFacts reads the core's own errors and HCS's HRESULTs.
func coreFacts(err error) errFacts {
	f := errnoFacts(err)
	f.AlreadyClosed = f.AlreadyClosed || errors.Is(err, errHandleClosed)
	f.Unavailable = f.Unavailable || errors.Is(err, errServiceGone)
	f.AlreadyStopped = f.AlreadyStopped || errors.Is(err, errAlreadyExited)
	return f
}

// callError is a failed call of an HCS function: what users search for is
// the function's name and the HRESULT, so the message leads with both.
type callError struct {
	call string
	err  error
}

func (e *callError) Error() string {
	var n syscall.Errno
	if errors.As(e.err, &n) {
		return fmt.Sprintf("%s: HRESULT 0x%08X: %v", e.call, uint32(n), e.err)
	}
	return e.call + ": " + e.err.Error()
}

func (e *callError) Unwrap() error { return e.err }

// named is err, if any, as a failure of HCS function call.
func named(call string, err error) error {
	if err == nil {
		return nil
	}
	return &callError{call: call, err: err}
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

// runOn carries out one operation of HCS function call on h's handle,
// which stays open until HCS has finished with the operation, and returns
// its result document.
func (c *computeCore) runOn(ctx context.Context, h *coreHandle, call string, start func(h, op hcsHandle) error) (string, error) {
	x, release, err := h.acquire()
	if err != nil {
		return "", err
	}
	var doc string
	err = c.runWith(ctx, call, func(op hcsHandle) error { return start(x, op) }, c.resultInto(&doc), func(error, bool) { release() })
	if err != nil {
		return "", err
	}
	return doc, nil
}

// runWith carries out one operation of HCS function call: start submits
// it, wait waits for its result. When ctx ends first the operation is
// cancelled (the error is the context's cause). HCS may not end it even then (an operation that hangs in
// vmcompute): after cancelGrace it is left to HCS, and runWith returns at
// the caller's deadline all the same; a goroutine of the core keeps
// waiting and closes the operation once HCS ends it. after, if not nil,
// runs once HCS has finished with the operation (before runWith returns,
// or later for one left to HCS): it gets the operation's error, and
// whether it was left, and releases what the operation used. The
// variables wait sets are the caller's to read only when runWith returns
// nil.
func (c *computeCore) runWith(ctx context.Context, call string, start, wait func(op hcsHandle) error, after func(err error, left bool)) error {
	if after == nil {
		after = func(error, bool) {}
	}
	if ctx.Err() != nil {
		err := context.Cause(ctx)
		after(err, false)
		return err
	}
	op, err := c.begin(call, start)
	if err != nil {
		after(err, false)
		return err
	}
	done := make(chan error, 1)
	go func() { done <- wait(op) }()
	finish := func(err error) {
		c.api.closeOperation(op)
		after(err, false)
	}
	select {
	case err := <-done:
		finish(err)
		return named(call, err)
	case <-ctx.Done():
	}
	// A cancelled operation still completes; only then may its handle
	// close. A failed cancel means it was completing anyway.
	_ = c.api.cancelOperation(op)
	t := time.NewTimer(cancelGrace)
	defer t.Stop()
	select {
	case err := <-done:
		finish(err)
		if err == nil {
			return nil
		}
		return fmt.Errorf("%s: %w (HCS ended the cancelled operation: %v)", call, context.Cause(ctx), err)
	case <-t.C:
	}
	left := &leftError{err: fmt.Errorf("%s: %w: %w", call, context.Cause(ctx), errOperationLeft), done: make(chan struct{})}
	c.bg.Add(1)
	c.nLeft.Add(1)
	go func() {
		defer c.bg.Done()
		defer c.nLeft.Add(-1)
		defer close(left.done)
		err := <-done
		c.api.closeOperation(op)
		after(err, true)
	}()
	return left
}

// leftError is the error of an operation left to HCS; done is closed once
// HCS ended it and what it used was released.
type leftError struct {
	err  error
	done chan struct{}
}

func (e *leftError) Error() string { return e.err.Error() }
func (e *leftError) Unwrap() error { return e.err }

// resultInto is a wait for runWith that keeps the operation's result
// document in doc.
func (c *computeCore) resultInto(doc *string) func(op hcsHandle) error {
	return func(op hcsHandle) error {
		var err error
		*doc, err = c.api.waitOperation(op, infiniteTimeout)
		return withResult(err, *doc)
	}
}

// waitResult waits for the result of op, for runWith.
func (c *computeCore) waitResult(op hcsHandle) error {
	doc, err := c.api.waitOperation(op, infiniteTimeout)
	return withResult(err, doc)
}

// operationsLeft is how many operations are left to HCS (runWith).
func (c *computeCore) operationsLeft() int { return int(c.nLeft.Load()) }

// submit starts an operation and does not wait for its result: what HCS
// accepted goes on after the handle is closed (Shutdown and Terminate,
// whose end is the system's exit notification).
func (c *computeCore) submit(call string, start func(op hcsHandle) error) error {
	op, err := c.begin(call, start)
	if err != nil {
		return err
	}
	c.api.closeOperation(op)
	return nil
}

// begin creates an operation and starts it with start. When start fails,
// the operation is closed and the error names call and carries HCS's
// detail.
func (c *computeCore) begin(call string, start func(op hcsHandle) error) (hcsHandle, error) {
	op, err := c.api.createOperation()
	if err != nil {
		return 0, named("HcsCreateOperation", err)
	}
	if err := start(op); err != nil {
		doc, _ := c.api.operationResult(op)
		c.api.closeOperation(op)
		return 0, named(call, withResult(err, doc))
	}
	return op, nil
}

// createContainer creates the compute system id from doc. A system made
// by a create that fails, or that its caller gave up on, is terminated
// and closed again: no compute system is left behind. One that fails
// because the id exists is only closed: the system of that id is not the
// create's to terminate.
func (c *computeCore) createContainer(ctx context.Context, id string, doc *schema2.ComputeSystem) (hcsContainer, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var h hcsHandle
	err = c.runWith(ctx, "HcsCreateComputeSystem", func(op hcsHandle) error {
		var err error
		h, err = c.api.createComputeSystem(id, string(b), op)
		return err
	}, c.waitResult, func(err error, left bool) {
		switch {
		case h == 0 || err == nil && !left:
		case coreFacts(err).AlreadyExists:
			c.api.closeComputeSystem(h)
		default:
			c.discard(h)
		}
	})
	if err != nil {
		return nil, err
	}
	s, err := c.newSystem(id, h)
	if err != nil {
		c.discard(h)
		return nil, err
	}
	return s, nil
}

// discard terminates and closes a system handle the core will not use.
// The terminate's answer does not matter: the system may never have been
// made.
func (c *computeCore) discard(h hcsHandle) {
	_ = c.submit("HcsTerminateComputeSystem", func(op hcsHandle) error { return c.api.terminateComputeSystem(h, op) })
	c.api.closeComputeSystem(h)
}

// openContainer opens the existing compute system id.
func (c *computeCore) openContainer(ctx context.Context, id string) (hcsContainer, error) {
	h, err := c.api.openComputeSystem(id)
	if err != nil {
		return nil, named("HcsOpenComputeSystem", err)
	}
	s, err := c.newSystem(id, h)
	if err != nil {
		c.api.closeComputeSystem(h)
		return nil, err
	}
	// A system that stopped before the callback was set sent its exit
	// notification to no one: ask. A failed question leaves the answer
	// to the notification.
	_, _ = s.CheckStopped(ctx)
	return s, nil
}

// systemSummary is one compute system as HcsEnumerateComputeSystems lists
// it.
type systemSummary struct {
	Id         string
	Owner      string
	State      string
	SystemType string
}

// listSystems lists the compute systems of owner. HCS filters by the
// query's owner; one of another owner in its answer is dropped all the
// same, for the caller may end what it lists.
func (c *computeCore) listSystems(ctx context.Context, owner string) ([]systemSummary, error) {
	q, err := json.Marshal(struct{ Owners []string }{[]string{owner}})
	if err != nil {
		return nil, err
	}
	var doc string
	err = c.runWith(ctx, "HcsEnumerateComputeSystems", func(op hcsHandle) error {
		return c.api.enumerateComputeSystems(string(q), op)
	}, c.resultInto(&doc), nil)
	if err != nil {
		return nil, err
	}
	var all []systemSummary
	if doc != "" {
		if err := json.Unmarshal([]byte(doc), &all); err != nil {
			return nil, fmt.Errorf("HCS listed the compute systems as %q: %w", doc, err)
		}
	}
	var out []systemSummary
	for _, s := range all {
		if s.Owner == owner {
			out = append(out, s)
		}
	}
	return out, nil
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
		return nil, named("HcsModifyServiceSettings", err)
	}
	q, _ := json.Marshal(schema2.PropertyQuery{PropertyTypes: []string{schema2.PropertyContainerCredentialGuard}})
	doc, err := c.api.getServiceProperties(string(q))
	err = named("HcsGetServiceProperties", err)
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
	return named("HcsModifyServiceSettings", c.api.modifyServiceSettings(string(b)))
}
