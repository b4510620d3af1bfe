//go:build linux

package emulation

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

const (
	// serverStartTimeout bounds how long Start waits for the wineserver's
	// socket.
	serverStartTimeout = 10 * time.Second
	// monitorInterval is how often a stopping (or opened) system scans its
	// silo.
	monitorInterval = 100 * time.Millisecond
	// shutdownServerGrace is how long the wineserver has to exit after
	// SIGTERM in a shutdown before it is killed.
	shutdownServerGrace = 5 * time.Second
	// closeWait bounds how long Close waits for a terminated system to
	// stop before it tears it down, and closeTeardown how long it tries
	// to; what is not done by then is carried on in the background
	// (carryon_linux.go).
	closeWait     = 2 * time.Second
	closeTeardown = 3 * time.Second
)

type phase int

const (
	phaseCreated phase = iota
	phaseRunning
	phaseStopping
	phaseStopped
)

// system is one compute system: a Wine silo, or a HostProcess container
// (hostprocess_linux.go).
type system struct {
	b   *Backend
	id  string
	dir string
	// prefix and cdir are the Wine prefix and the Linux directory of C:
	// the system's processes run with: the silo's own, or the host
	// prefix's.
	prefix string
	cdir   string
	// opened is set for a system attached by Open: its wineserver is not
	// this process's child.
	opened bool

	done        chan struct{} // closed when the system has stopped
	wake        chan struct{} // pokes the monitor
	monitorStop chan struct{}
	monitorDone chan struct{} // nil until the monitor starts

	mu        sync.Mutex
	st        *persisted
	phase     phase
	stopAsked bool // Shutdown or Terminate was called
	terminate bool // Terminate was called
	closed    bool
	exitErr   error
	started   time.Time
	// ran is set once a process has run in the system: a HostProcess
	// container stops when its last process has exited after that.
	ran bool
	// The wineserver, when this process started it.
	server       *exec.Cmd
	serverExited chan struct{}
	serverOutput *tailBuffer
	// serverErr is the wineserver's exit, set before serverExited closes.
	serverErr error
	// CPU time of the silo's processes that ended and were reaped here.
	cpuUser, cpuKernel time.Duration
	commitPeak         uint64
	// lastStats is the last sample Stats took (statsReuse).
	lastStats *compute.Stats
	// termWatch starts the report of a terminated system that does not
	// stop (reportStoppedAfterGrace), once; stuck is set (under mu) when
	// that report was made: its processes are still there.
	termWatch sync.Once
	stuck     bool
}

var _ compute.System = (*system)(nil)

func newSystem(b *Backend, id, dir string, st *persisted, opened bool) *system {
	prefix, cdir := filepath.Join(dir, prefixDir), filepath.Join(dir, cDir)
	if st.HostProcess != nil {
		prefix, cdir = b.hostPrefix(), b.hostDrive()
	}
	return &system{
		b:           b,
		id:          id,
		dir:         dir,
		prefix:      prefix,
		cdir:        cdir,
		opened:      opened,
		st:          st,
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		monitorStop: make(chan struct{}),
	}
}

func (s *system) ID() string { return s.id }

func (s *system) Wait() <-chan struct{} { return s.done }

func (s *system) ExitError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// gone is the error of a system that has stopped or been closed.
func (s *system) gone() error {
	return fmt.Errorf("emulation: system %s has stopped: %w", s.id, errdefs.ErrNotFound)
}

// usableLocked checks that the system can still be acted on.
func (s *system) usableLocked() error {
	if s.closed || s.phase == phaseStopped {
		return s.gone()
	}
	return nil
}

// finish marks the system stopped with err (nil for a requested stop) and
// closes Wait.
func (s *system) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(err)
}

func (s *system) finishLocked(err error) {
	if s.phase == phaseStopped {
		return
	}
	s.phase = phaseStopped
	if s.stopAsked {
		err = nil
	}
	s.exitErr = err
	close(s.done)
}

func (s *system) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *system) addCPU(user, kernel time.Duration) {
	s.mu.Lock()
	s.cpuUser += user
	s.cpuKernel += kernel
	s.mu.Unlock()
}

// Shutdown sends every process of the silo except the wineserver and
// Wine's own system processes the closest thing Wine has to
// CTRL_SHUTDOWN_EVENT: SIGINT, which Wine delivers to console control
// handlers as CTRL_C_EVENT (Wine cannot deliver CTRL_SHUTDOWN_EVENT). It
// does not wait: once those processes have exited, the monitor stops the
// wineserver (SIGTERM, then SIGKILL after 5 s), which ends Wine's system
// processes, and Wait closes. A process that ignores the event keeps the
// system running until Terminate.
func (s *system) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.stopAsked = true
	if s.phase == phaseCreated {
		s.finishLocked(nil)
		s.mu.Unlock()
		return nil
	}
	terminating := s.terminate
	s.phase = phaseStopping
	s.mu.Unlock()
	if !terminating {
		procs, err := s.processes()
		if err != nil {
			return err
		}
		for _, p := range procs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !s.isServer(p) && !isWineSystemProcess(p.pid) {
				signalProc(p, unix.SIGINT)
			}
		}
	}
	s.poke()
	return nil
}

// Terminate SIGKILLs the wineserver and every process of the silo; the
// monitor repeats that until none is left, then closes Wait. (The
// wineserver is killed directly rather than with `wineserver -k`, which is
// itself a client of the server and would hang on a wedged one; the
// registry the server would save on a clean exit is thrown away with the
// prefix anyway.)
func (s *system) Terminate(ctx context.Context) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.stopAsked, s.terminate = true, true
	if s.phase == phaseCreated {
		s.finishLocked(nil)
		s.mu.Unlock()
		return nil
	}
	s.phase = phaseStopping
	s.mu.Unlock()
	if s.st.Cgroup != "" {
		// Everything in the silo at once, as a job object's termination.
		if err := killCgroup(s.st.Cgroup); err != nil {
			return err
		}
		s.poke()
		s.termWatch.Do(func() { go s.reportStoppedAfterGrace() })
		return nil
	}
	procs, err := s.processes()
	if err != nil {
		return err
	}
	for _, p := range procs {
		if s.isServer(p) {
			signalProc(p, unix.SIGKILL)
		}
	}
	for _, p := range procs {
		signalProc(p, unix.SIGKILL)
	}
	s.poke()
	s.termWatch.Do(func() { go s.reportStoppedAfterGrace() })
	return nil
}

// reportStoppedAfterGrace reports a terminated system stopped if it has
// not stopped after exitGrace: its processes take no SIGKILL (a frozen
// cgroup), and HCS's terminate gives a container no such say. Close
// carries its teardown on in the background until they are gone.
func (s *system) reportStoppedAfterGrace() {
	select {
	case <-s.done:
		return
	case <-time.After(exitGrace):
	}
	log.L.WithFields(log.Fields{"system": s.id, "grace": exitGrace}).Warn("emulation: a terminated system has not stopped (its cgroup frozen?); it is reported stopped, and its teardown goes on ending its processes")
	s.mu.Lock()
	s.stuck = true
	s.finishLocked(nil)
	s.mu.Unlock()
}

// Close releases the system. A system that has stopped, or that was
// terminated, is torn down: its mounts are unmounted and Root/<id> is
// removed. Close waits at most closeWait for a terminated system's
// processes to go and closeTeardown for the teardown; a teardown that
// cannot finish by then (processes that ignore SIGKILL for a while, a busy
// cgroup) is carried on in the background (Backend.Drain waits for it) and
// is no error of Close. A system still running is left running, reachable
// with Open.
func (s *system) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	terminated := s.terminate
	s.mu.Unlock()
	if terminated {
		select {
		case <-s.done:
		case <-time.After(closeWait):
		}
	}
	close(s.monitorStop)
	if s.monitorDone != nil {
		<-s.monitorDone
	}
	stopped := false
	select {
	case <-s.done:
		stopped = true
	default:
	}
	if !stopped && !terminated {
		s.b.forget(s)
		return nil
	}
	s.mu.Lock()
	st, stuck := *s.st, s.stuck
	s.mu.Unlock()
	err := fmt.Errorf("emulation: system %s: its processes did not go within %v of its termination", s.id, closeWait)
	// A stuck system's teardown would only wait again: it goes straight
	// to the background.
	if stopped && !stuck {
		ctx, cancel := context.WithTimeout(context.Background(), closeTeardown)
		err = s.b.removeSystem(ctx, s.dir, &st)
		cancel()
	}
	if err == nil {
		s.b.forget(s)
		return nil
	}
	// The system stays registered with the reaper until the teardown
	// ends: its processes' zombies are reaped as they go.
	s.b.carryOn(s.id, s.dir, &st, err, func() { s.b.forget(s) })
	return nil
}
