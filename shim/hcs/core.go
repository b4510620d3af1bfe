package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
