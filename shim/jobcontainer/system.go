package jobcontainer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
)

// system is a compute.System over a job object.
//
// One goroutine (watch) reads the job's messages from its completion port
// and closes done once the job has no process left after one ran, or after
// a stop was requested. The job handle is used under hmu for reading and
// closed under it for writing, so it is never closed under a call.
type system struct {
	b           *Backend
	id          string
	mountPoint  string
	inheritUser bool
	port        handle // 0 for an opened system: it polls instead

	done    chan struct{} // closed when the system stopped (or watching failed)
	quit    chan struct{} // closed by Close: watch returns
	watched chan struct{} // closed when watch has returned

	hmu sync.RWMutex
	job handle // 0 once closed

	mu            sync.Mutex
	held          held // what Close releases
	closed        bool
	started       time.Time
	stopRequested bool
	stopped       bool
	exitErr       error
	procs         map[*process]struct{}

	// tokens are the logon tokens of the users processes ran as, kept
	// for the system's life; tmu serializes logons.
	tmu    sync.Mutex
	tokens map[string]handle
}

var _ compute.System = (*system)(nil)

func newSystem(b *Backend, id string, job, port handle, h held, inheritUser bool) *system {
	s := &system{
		b:           b,
		id:          id,
		mountPoint:  h.MountPoint,
		inheritUser: inheritUser,
		port:        port,
		job:         job,
		held:        h,
		done:        make(chan struct{}),
		quit:        make(chan struct{}),
		watched:     make(chan struct{}),
		procs:       make(map[*process]struct{}),
		tokens:      make(map[string]handle),
	}
	go s.watch()
	return s
}

// watch waits for the job's messages (or, without a port, polls) and
// reads the job's process count after each.
func (s *system) watch() {
	defer close(s.watched)
	for {
		if s.port != 0 {
			_, key, err := s.b.host.jobMessage(s.port, uint32(s.b.messageTimeout/time.Millisecond))
			switch {
			case err == nil && key == quitKey:
				return
			case err != nil && !errors.Is(err, errTimeout):
				s.lost(classify(fmt.Sprintf("HostProcess container %s: read its job's messages", s.id), err, s.b.host.facts(err)))
				return
			}
		} else {
			select {
			case <-s.quit:
				return
			case <-time.After(s.b.pollInterval):
			}
		}
		if s.checkStopped() {
			return
		}
	}
}

// checkStopped reads the job's process count and records the stop when
// the job has no process left after one ran, or when a stop was
// requested. It reports whether the system has stopped.
func (s *system) checkStopped() bool {
	s.hmu.RLock()
	defer s.hmu.RUnlock()
	if s.job == 0 {
		return true
	}
	a, err := s.b.host.jobAccounting(s.job)
	if err != nil {
		s.lost(classify(fmt.Sprintf("HostProcess container %s: read its job's process count", s.id), err, s.b.host.facts(err)))
		return true
	}
	s.mu.Lock()
	stop := a.ActiveProcesses == 0 && (a.TotalProcesses > 0 || s.stopRequested)
	s.mu.Unlock()
	if stop {
		s.stop(nil)
	}
	return stop
}

// stop records that the system stopped, once, with why (nil for a
// requested or natural stop), and kills the processes still tracked: the
// job had none left, so they are gone already or were never in it.
func (s *system) stop(why error) {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return
	default:
	}
	s.stopped, s.exitErr = why == nil, why
	procs := make([]*process, 0, len(s.procs))
	for p := range s.procs {
		procs = append(procs, p)
	}
	close(s.done)
	s.mu.Unlock()
	for _, p := range procs {
		go p.systemStopped()
	}
}

// lost records that the backend lost track of the job.
func (s *system) lost(err error) {
	log.L.WithError(err).WithField("id", s.id).Error("lost track of a HostProcess container's job")
	s.stop(fmt.Errorf("%w: %w", err, errdefs.ErrUnavailable))
}

func (s *system) ID() string { return s.id }

// check fails when the system cannot take requests: Close was called
// (FailedPrecondition), or it has stopped (NotFound).
func (s *system) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("HostProcess container %s has been closed: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	select {
	case <-s.done:
		if s.exitErr != nil {
			return s.exitErr
		}
		return fmt.Errorf("HostProcess container %s has stopped: %w", s.id, errdefs.ErrNotFound)
	default:
		return nil
	}
}

// withJob runs f with the job handle, held against Close.
func (s *system) withJob(f func(job handle) error) error {
	s.hmu.RLock()
	defer s.hmu.RUnlock()
	if err := s.check(); err != nil {
		return err
	}
	return f(s.job)
}

func (s *system) fail(what string, err error) error {
	return classify(fmt.Sprintf("%s HostProcess container %s", what, s.id), err, s.b.host.facts(err))
}

// Start marks the system started: a job object has nothing to boot, its
// first process is started by CreateProcess.
func (s *system) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started.IsZero() {
		return fmt.Errorf("HostProcess container %s has already started: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	s.started = time.Now()
	return nil
}

// Shutdown sends CTRL_SHUTDOWN_EVENT to every process of the job, as
// runhcs does, and does not wait: the system stops when they have exited.
// A process that cannot be signalled is logged; the caller terminates the
// system at its deadline.
func (s *system) Shutdown(ctx context.Context) error {
	return s.requestStop(ctx, "shut down", func(job handle) error {
		pids, err := s.b.host.jobProcessIDs(job)
		if err != nil {
			return err
		}
		for _, pid := range pids {
			if err := s.ctrlEventToPID(pid, ctrlShutdownEvent); err != nil {
				log.G(ctx).WithError(err).WithFields(log.Fields{"id": s.id, "pid": pid}).Warn("send CTRL_SHUTDOWN_EVENT to a process of a HostProcess container")
			}
		}
		return nil
	})
}

// ShutdownGrace is runhcs's deadline for a HostProcess container's
// graceful stop (hcsshim internal/jobcontainers Shutdown): 5 s, then the
// job is terminated.
func (s *system) ShutdownGrace() time.Duration { return shutdownGrace }

const shutdownGrace = 5 * time.Second

func (s *system) ctrlEventToPID(pid, event uint32) error {
	p, err := s.b.host.openProcess(pid)
	if err != nil {
		return err
	}
	defer s.b.host.closeHandle(p)
	return s.b.host.ctrlEvent(p, event)
}

// Terminate is TerminateJobObject: every process of the job ends with
// exit code 1, as runhcs terminates a HostProcess container.
func (s *system) Terminate(ctx context.Context) error {
	return s.requestStop(ctx, "terminate", func(job handle) error {
		return s.b.host.terminateJobObject(job, 1)
	})
}

// requestStop marks the stop requested, runs call, then reads the job's
// process count: a job with no process left has stopped already, and
// sends no message.
func (s *system) requestStop(ctx context.Context, what string, call func(job handle) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	was := s.stopRequested
	s.stopRequested = true
	s.mu.Unlock()
	if err := s.withJob(call); err != nil {
		s.mu.Lock()
		s.stopRequested = was
		s.mu.Unlock()
		if errdefs.IsNotFound(err) || errdefs.IsFailedPrecondition(err) || errdefs.IsUnavailable(err) {
			return err
		}
		return s.fail(what, err)
	}
	s.checkStopped()
	return nil
}

// Wait is closed when the system has stopped.
func (s *system) Wait() <-chan struct{} { return s.done }

// ExitError is why the system stopped, once Wait is closed: nil when its
// processes ended or were ended on request.
func (s *system) ExitError() error {
	select {
	case <-s.done:
	default:
		return fmt.Errorf("HostProcess container %s has not stopped: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// Stats are the job's accounting and its processes' memory.
func (s *system) Stats(ctx context.Context) (*compute.Stats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var st *compute.Stats
	err := s.withJob(func(job handle) error {
		a, err := s.b.host.jobAccounting(job)
		if err != nil {
			return s.fail("read the accounting of", err)
		}
		// A host without I/O accounting for jobs (Wine) reports none.
		io, err := s.b.host.jobIO(job)
		if err != nil {
			if !s.b.host.facts(err).NotSupported {
				return s.fail("read the I/O counters of", err)
			}
			io = ioCounters{}
		}
		peak, err := s.b.host.peakJobMemory(job)
		if err != nil {
			return s.fail("read the peak memory of", err)
		}
		procs, err := s.jobProcesses(job)
		if err != nil {
			return err
		}
		commit, err := s.jobCommit(job, procs)
		if err != nil {
			return err
		}
		s.mu.Lock()
		started := s.started
		s.mu.Unlock()
		st = statsOf(a, io, jobMemoryUse{commit: commit, peak: peak}, procs, started, time.Now())
		return nil
	})
	return st, err
}

// jobCommit is the job's committed memory now, as runhcs reports it
// (JobObjectMemoryUsageInformation); a host without that class (Wine)
// gives the sum of its processes' private bytes, the same figure less
// what processes that exited still hold.
func (s *system) jobCommit(job handle, procs []processRecord) (uint64, error) {
	commit, err := s.b.host.jobMemory(job)
	if err == nil {
		return commit, nil
	}
	if f := s.b.host.facts(err); !f.NotSupported && !f.InvalidParameter {
		return 0, s.fail("read the committed memory of", err)
	}
	commit = 0
	for _, p := range procs {
		commit += p.PrivateBytes
	}
	return commit, nil
}

// ProcessList lists the job's processes.
func (s *system) ProcessList(ctx context.Context) ([]compute.ProcessInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var list []compute.ProcessInfo
	err := s.withJob(func(job handle) error {
		pids, err := s.b.host.jobProcessIDs(job)
		if err != nil {
			return s.fail("list the processes of", err)
		}
		records, err := s.b.host.systemProcesses()
		if err != nil {
			return s.fail("read the processes of", err)
		}
		list = processInfos(records, pids)
		return nil
	})
	return list, err
}

// jobProcesses are the records of the job's processes.
func (s *system) jobProcesses(job handle) ([]processRecord, error) {
	pids, err := s.b.host.jobProcessIDs(job)
	if err != nil {
		return nil, s.fail("list the processes of", err)
	}
	records, err := s.b.host.systemProcesses()
	if err != nil {
		return nil, s.fail("read the processes of", err)
	}
	return inJob(records, pids), nil
}

// Modify changes the job's limits: a memory limit, a CPU rate, the
// affinity. Storage limits do not apply to a HostProcess container.
func (s *system) Modify(ctx context.Context, r compute.Resources) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.StorageIOPSMaximum != 0 || r.StorageBandwidthMaximum != 0 {
		return notSupported("HostProcess container %s: storage limits do not apply: its processes use the host's disks, which a job object does not limit", s.id)
	}
	return s.withJob(func(job handle) error {
		if err := s.b.applyLimits(job, limitsOf(r, s.b.HostCPUs()), true); err != nil {
			return fmt.Errorf("HostProcess container %s: %w", s.id, err)
		}
		return nil
	})
}

// track remembers a running process, so that it is killed if the system
// stops under it; on a stopped system it fails (NotFound).
func (s *system) track(p *process) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return fmt.Errorf("HostProcess container %s stopped while process %d started: %w", s.id, p.pid, errdefs.ErrNotFound)
	default:
	}
	s.procs[p] = struct{}{}
	return nil
}

func (s *system) forget(p *process) {
	s.mu.Lock()
	delete(s.procs, p)
	s.mu.Unlock()
}

// Close ends the watch, closes the job object (its processes end with its
// last handle) and the logon tokens, then, if the system had stopped,
// releases what it held: the rootfs mount and the temporary users. A
// system closed while running keeps them and its record, and Close says
// so; a later Open of the id, or its next Create, releases them.
func (s *system) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	if s.port != 0 {
		if err := s.b.host.postMessage(s.port, quitKey); err != nil {
			log.L.WithError(err).WithField("id", s.id).Warn("end the watch of a HostProcess container")
		}
	}
	<-s.watched

	var errs []error
	s.hmu.Lock()
	for _, h := range []handle{s.port, s.job} {
		if h != 0 {
			if err := s.b.host.closeHandle(h); err != nil {
				errs = append(errs, s.fail("close a handle of", err))
			}
		}
	}
	s.job = 0
	s.hmu.Unlock()
	s.tmu.Lock()
	for _, t := range s.tokens {
		if err := s.b.host.closeHandle(t); err != nil {
			errs = append(errs, s.fail("close a logon token of", err))
		}
	}
	s.tokens = nil
	s.tmu.Unlock()

	s.mu.Lock()
	stopped, h := s.stopped, s.held
	s.mu.Unlock()
	switch {
	case h.Scratch == "" && len(h.Users) == 0:
	case !stopped:
		errs = append(errs, fmt.Errorf("HostProcess container %s was closed before it stopped: its rootfs at %s and temporary users stay until its id is opened or created again: %w", s.id, h.MountPoint, errdefs.ErrFailedPrecondition))
	default:
		if err := s.b.release(context.Background(), h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
