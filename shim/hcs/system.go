package hcs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// system is a compute.System over a compute system handle.
//
// One goroutine (wait) owns the handle's Wait for the life of the handle
// and closes done when it returns: when the system stopped, or when Close
// closed the handle first. Only a system that really stopped has what it
// held released by Close.
type system struct {
	b  *Backend
	id string
	c  hcsContainer
	// held is what Close releases: the scratch layer ("" when unknown: an
	// opened system without a record) and the Container Credential Guard
	// instance.
	held record

	done chan struct{} // closed when wait has recorded the stop

	mu            sync.Mutex
	closed        bool // Close was called
	stopRequested bool // a Shutdown or Terminate was accepted
	stopped       bool // the system stopped (set before done is closed)
	exitErr       error
	procs         map[*process]struct{} // processes still running
}

var _ compute.System = (*system)(nil)

func newSystem(b *Backend, id string, c hcsContainer, held record) *system {
	s := &system{
		b:     b,
		id:    id,
		c:     c,
		held:  held,
		done:  make(chan struct{}),
		procs: make(map[*process]struct{}),
	}
	go s.wait()
	return s
}

// wait owns the handle's Wait.
func (s *system) wait() {
	err := s.c.Wait()
	f := s.b.api.facts(err)

	s.mu.Lock()
	s.stopped, s.exitErr = systemExit(s.id, err, f, s.closed, s.stopRequested)
	procs := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	// done closes under the lock, so a process tracked after the snapshot
	// above sees it closed and is stopped by track, not left out.
	close(s.done)
	s.mu.Unlock()

	if s.stopped {
		for _, p := range procs {
			s.b.background(p.systemStopped)
		}
	}
}

// systemExit reads the handle's Wait result: whether the system stopped and
// why (compute.System.ExitError). A requested Shutdown or Terminate is a
// clean stop whatever HCS says; an already-closed error means the handle
// was closed before the system stopped.
func systemExit(id string, err error, f errFacts, closed, requested bool) (bool, error) {
	switch {
	case err != nil && f.AlreadyClosed && closed:
		return false, fmt.Errorf("compute system %s: the handle was closed before the system stopped: %w", id, errdefs.ErrFailedPrecondition)
	case err != nil && f.AlreadyClosed:
		return false, fmt.Errorf("compute system %s: the handle was lost before the system stopped: %w", id, errdefs.ErrUnavailable)
	case requested || err == nil:
		return true, nil
	}
	return true, classify(fmt.Sprintf("compute system %s stopped unexpectedly", id), err, f)
}

func (s *system) ID() string { return s.id }

// check fails when the system cannot take requests: Close was called
// (FailedPrecondition), or it has stopped (NotFound).
func (s *system) check() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("compute system %s has been closed: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.stopped {
			return s.exitErr
		}
		return fmt.Errorf("compute system %s has stopped: %w", s.id, errdefs.ErrNotFound)
	default:
		return nil
	}
}

func (s *system) fail(what string, err error) error {
	return classify(fmt.Sprintf("%s compute system %s", what, s.id), err, s.b.api.facts(err))
}

// Start is HcsStartComputeSystem.
func (s *system) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if err := s.c.Start(ctx); err != nil {
		return classify(fmt.Sprintf("start compute system %s", s.id), err, s.settle(ctx, s.b.api.facts(err)))
	}
	return nil
}

// settle asks HCS, after a Start, Shutdown or Terminate failed with facts
// f, whether the system has stopped: its exit notification may never come
// (HCS lost it, or the system exited during its create, before the
// callback was set). The failure of a system that has stopped is NotFound,
// as every call's once the system is gone, and Wait closes.
func (s *system) settle(ctx context.Context, f errFacts) errFacts {
	if stopped, _ := s.c.CheckStopped(ctx); stopped {
		f.AlreadyStopped = true
	}
	return f
}

// Shutdown is HcsShutDownComputeSystem: HCS sends CTRL_SHUTDOWN_EVENT to
// the system's processes and stops it when they have exited. It returns
// once HCS accepted the request, and the stop shows on Wait
// (compute.System.Shutdown does not wait: the caller bounds its wait on
// Wait with its own deadline, then Terminates).
func (s *system) Shutdown(ctx context.Context) error {
	return s.stop(ctx, "shut down", s.c.Shutdown)
}

// Terminate is HcsTerminateComputeSystem, likewise. The backend carries
// it on until the system stops (terminate.go), whatever HCS answered.
func (s *system) Terminate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	err := s.stop(ctx, "terminate", s.c.Terminate)
	s.b.terminations.carryOn(s, err)
	return err
}

func (s *system) stop(ctx context.Context, what string, call func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	// Mark the request first: the system may stop before call returns.
	s.mu.Lock()
	wasRequested := s.stopRequested
	s.stopRequested = true
	s.mu.Unlock()
	err := call(ctx)
	f := s.b.api.facts(err)
	accepted, err := stopResult(err, f)
	if !accepted {
		s.mu.Lock()
		select {
		case <-s.done:
		default:
			s.stopRequested = wasRequested
		}
		s.mu.Unlock()
	}
	if err == nil {
		return nil
	}
	// HCS_E_INVALID_STATE is HCS's answer to a terminate after the exit.
	return classify(fmt.Sprintf("%s compute system %s", what, s.id), err, s.settle(ctx, f))
}

// stopResult reads Shutdown's or Terminate's error: whether HCS accepted
// the request, and the error to report. Pending is accepted. A
// system that has already stopped or is gone is not an acceptance; its
// error classifies as NotFound.
func stopResult(err error, f errFacts) (accepted bool, _ error) {
	switch {
	case err == nil, f.Pending:
		return true, nil
	}
	return false, err
}

// Wait is closed when the system has stopped (or its handle was closed).
func (s *system) Wait() <-chan struct{} { return s.done }

// ExitError is why the system stopped, once Wait is closed.
func (s *system) ExitError() error {
	select {
	case <-s.done:
	default:
		return fmt.Errorf("compute system %s has not stopped: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// Stats is the system's Statistics property.
func (s *system) Stats(ctx context.Context) (*compute.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	p, err := s.c.Properties(ctx, schema2.PropertyStatistics)
	if err != nil {
		return nil, s.queryFailed("statistics of", err)
	}
	return convertStats(p.Statistics, time.Now()), nil
}

// ProcessList is the system's ProcessList property.
func (s *system) ProcessList(ctx context.Context) ([]compute.ProcessInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	p, err := s.c.Properties(ctx, schema2.PropertyProcessList)
	if err != nil {
		return nil, s.queryFailed("process list of", err)
	}
	return convertProcessList(p.ProcessList), nil
}

// queryFailed classifies a failed property query; a system in the middle
// of stopping is NotFound, as runhcs reports it.
func (s *system) queryFailed(what string, err error) error {
	f := s.b.api.facts(err)
	if goneWhileQuerying(f) {
		return fmt.Errorf("%s compute system %s: %w: %w", what, s.id, err, errdefs.ErrNotFound)
	}
	return classify(fmt.Sprintf("%s compute system %s", what, s.id), err, f)
}

// CreateProcess is HcsCreateProcess, then the process's pipes: they
// are the backend's from then on, copied to and from p's streams.
func (s *system) CreateProcess(ctx context.Context, ps *compute.ProcessSettings) (compute.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := processParameters(ps)
	if err != nil {
		return nil, fmt.Errorf("process in compute system %s: %w", s.id, err)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	hp, err := s.c.CreateProcess(ctx, cfg)
	if err != nil {
		return nil, s.fail("create a process in", err)
	}
	stdin, stdout, stderr, err := hp.Stdio()
	if err != nil {
		err = classify(fmt.Sprintf("stdio of process %d in compute system %s", hp.Pid(), s.id), err, s.b.api.facts(err))
		if kerr := hp.Kill(ctx); kerr != nil {
			log.G(ctx).WithError(kerr).Warn("kill a process whose stdio failed")
		}
		if cerr := hp.Close(); cerr != nil {
			log.G(ctx).WithError(cerr).Warn("close a process whose stdio failed")
		}
		return nil, err
	}
	if !cfg.CreateStdInPipe {
		stdin = nil
	}
	if !cfg.CreateStdOutPipe {
		stdout = nil
	}
	if !cfg.CreateStdErrPipe {
		stderr = nil
	}
	p := newProcess(s, hp, ps, stdin, stdout, stderr)
	s.track(p)
	go p.wait()
	return p, nil
}

// track remembers a running process, so that it is killed if the system
// stops under it.
func (s *system) track(p *process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		if s.stopped {
			s.b.background(p.systemStopped)
		}
	default:
		s.procs[p] = struct{}{}
	}
}

func (s *system) forget(p *process) {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
}

// Close closes the handle, then, if the system has stopped, releases what
// it held: its Container Credential Guard instance, its scratch
// (UnprepareLayer, DeactivateLayer), and the record. The shim closes a
// system after Wait, so that is the usual case. A system still being
// terminated is handed to the backend, which releases what it held once
// it stops (terminate.go). Any other system closed while still running
// keeps its scratch (unpreparing the volume under a live silo would break
// it) and its record, and Close says so; a later Open and Close of the
// id, or the next Create of it, releases it.
func (s *system) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	select {
	case <-s.done:
	default:
		if s.b.terminations.handOver(s) {
			log.L.WithField("id", s.id).Warn("compute system closed while it is still being terminated; the backend carries on, and releases what it held once it stops")
			return nil
		}
	}

	var errs []error
	if err := s.closeHandle(); err != nil {
		errs = append(errs, err)
	}
	stopped := false
	select {
	case <-s.done:
		s.mu.Lock()
		stopped = s.stopped
		s.mu.Unlock()
	default:
	}
	switch {
	case s.held.Scratch == "":
	case !stopped:
		errs = append(errs, fmt.Errorf("compute system %s was closed before it stopped: its scratch layer %s stays mounted: %w", s.id, s.held.Scratch, errdefs.ErrFailedPrecondition))
	default:
		if err := s.releaseHeld(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// closeHandle closes the system's handle, and waits a while for wait to
// notice and record whether the system had stopped first.
func (s *system) closeHandle() error {
	err := s.c.Close()
	if err != nil {
		if s.b.api.facts(err).AlreadyClosed {
			return nil
		}
		return classify(fmt.Sprintf("close compute system %s", s.id), err, s.b.api.facts(err))
	}
	t := time.NewTimer(s.b.closeWaitTimeout)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
	}
	return nil
}

// releaseHeld releases what the stopped system held, if the backend knows
// it (an opened system without a record holds nothing it knows of).
func (s *system) releaseHeld() error {
	if s.held.Scratch == "" {
		return nil
	}
	return s.b.release(s.held)
}

// closeAfterStop waits a while for a terminated system to stop (not past
// ctx), then closes it; failures are logged. A system that has not stopped
// by then is left to the background terminate.
func (s *system) closeAfterStop(ctx context.Context) {
	t := time.NewTimer(s.b.lostProcessTimeout)
	select {
	case <-s.done:
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if err := s.Close(); err != nil {
		log.G(ctx).WithError(err).WithField("id", s.id).Warn("close a compute system after a failure")
	}
}
