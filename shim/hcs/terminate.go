package hcs

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/log"

	winrecord "github.com/winproc/winproc/shim/record"
)

// A terminate HCS accepts ends with the system's exit notification. One
// that fails, or whose exit never comes (HCS lost the notification, the
// operation hangs in vmcompute, the service restarted), would leave the
// compute system running with its scratch mounted, and its pod stuck in
// Terminating. So the backend carries a Terminate on until the system
// stops: every terminateRetry it asks HCS whether the system has stopped
// (for a lost notification), and terminates it again; after
// terminateGiveUp it stops. Backend.Terminations lists what it is still
// terminating, for the operator's tools.
//
// The shim may Close the system meanwhile (its teardown does not wait for
// ever): the backend then keeps the handle, and releases what the system
// held once it stops. When it gives up it closes the handle (HCS
// terminates a system with its last handle,
// ShouldTerminateOnLastHandleClosed), logs what was left, and keeps the
// record, for the shim's delete or a sweep of orphans.

const (
	// terminateRetry is how often a terminate is tried again, and how
	// long each try may take.
	terminateRetry = 5 * time.Second
	// terminateGiveUp is how long the backend keeps terminating a system.
	terminateGiveUp = 10 * time.Minute
)

// Termination is a compute system the backend is still terminating.
type Termination struct {
	ID string
	// Since is when the first terminate was asked for, GiveUp when the
	// backend stops trying.
	Since, GiveUp time.Time
	// Attempts counts the terminates sent, the first included.
	Attempts int
	// LastError is why the last attempt failed, nil when HCS accepted it.
	LastError error
	// Closed is set once the shim closed the system: the backend holds
	// its handle and releases what it held when it stops.
	Closed bool
}

// terminations are the systems a backend is terminating. Each has a
// record in dir while it is, for `winproc doctor` (PendingTerminations).
type terminations struct {
	dir winrecord.Dir
	mu  sync.Mutex
	m   map[*system]*Termination
}

// pendingDir is the directory of the state directory that holds the
// records of pending terminates.
const pendingDir = "terminating"

// pendingRecord is the record of a pending terminate.
type pendingRecord struct {
	ID        string         `json:"id"`
	Since     time.Time      `json:"since"`
	GiveUp    time.Time      `json:"giveUp"`
	Attempts  int            `json:"attempts"`
	LastError string         `json:"lastError,omitempty"`
	Closed    bool           `json:"closed,omitempty"`
	Shim      winrecord.Shim `json:"shim"`
}

// save records e; a failure is logged only: the terminate goes on.
func (t *terminations) save(e *Termination) {
	rec := pendingRecord{ID: e.ID, Since: e.Since, GiveUp: e.GiveUp, Attempts: e.Attempts, Closed: e.Closed, Shim: winrecord.Self()}
	if e.LastError != nil {
		rec.LastError = e.LastError.Error()
	}
	if err := t.dir.Write(e.ID, rec); err != nil {
		log.L.WithError(err).WithField("id", e.ID).Warn("record a pending terminate")
	}
}

// PendingTerminations lists the terminates carried on in the background
// by the running shims whose backend keeps its records in stateDir
// (Options' StateDir), for `winproc doctor`. A record whose process is
// gone is skipped: its terminate ended with it (a shim killed, or the
// delete subcommand that exited), and a system left behind is the orphans
// check's; RemoveOrphan removes the record.
func PendingTerminations(stateDir string) ([]Termination, error) {
	dir := pendingTerminationsDir(stateDir)
	ids, err := dir.IDs()
	if err != nil {
		return nil, err
	}
	var out []Termination
	for _, id := range ids {
		var rec pendingRecord
		ok, err := dir.Read(id, &rec)
		if err != nil {
			return nil, err
		}
		if !ok || !winrecord.Alive(rec.Shim) { // ended meanwhile, or with its process
			continue
		}
		t := Termination{ID: rec.ID, Since: rec.Since, GiveUp: rec.GiveUp, Attempts: rec.Attempts, Closed: rec.Closed}
		if rec.LastError != "" {
			t.LastError = errors.New(rec.LastError)
		}
		out = append(out, t)
	}
	return out, nil
}

// Terminations lists the compute systems the backend is still
// terminating in the background, by id.
func (b *Backend) Terminations() []Termination {
	t := &b.terminations
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Termination, 0, len(t.m))
	for _, e := range t.m {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Termination) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// carryOn records a terminate of s that was sent (err: how it failed),
// and carries it on in the background until s stops.
func (t *terminations) carryOn(s *system, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.m[s]; ok {
		e.Attempts++
		e.LastError = err
		t.save(e)
		return
	}
	if t.m == nil {
		t.m = make(map[*system]*Termination)
	}
	now := time.Now()
	e := &Termination{ID: s.id, Since: now, GiveUp: now.Add(s.b.terminateGiveUp), Attempts: 1, LastError: err}
	t.m[s] = e
	t.save(e)
	s.b.background(func() { s.keepTerminating(e.GiveUp) })
}

// handOver gives the backend s, which the shim closes while it is still
// being terminated; false when it is not.
func (t *terminations) handOver(s *system) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[s]
	if ok {
		e.Closed = true
		t.save(e)
	}
	return ok
}

// end forgets s's termination and returns its last state.
func (t *terminations) end(s *system) Termination {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := *t.m[s]
	delete(t.m, s)
	if err := t.dir.Remove(e.ID); err != nil {
		log.L.WithError(err).WithField("id", e.ID).Warn("remove the record of a pending terminate")
	}
	return e
}

// keepTerminating is the background terminate of s: it ends when s stops
// or at giveUp.
func (s *system) keepTerminating(giveUp time.Time) {
	tick := time.NewTicker(s.b.terminateRetry)
	defer tick.Stop()
	deadline := time.NewTimer(time.Until(giveUp))
	defer deadline.Stop()
	for {
		select {
		case <-s.done:
			s.terminated(s.b.terminations.end(s))
			return
		case <-deadline.C:
			s.gaveUp(s.b.terminations.end(s))
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.b.terminateRetry)
		stopped, err := s.terminateAgain(ctx)
		cancel()
		if !stopped { // else done is closing
			s.b.terminations.carryOn(s, err)
		}
	}
}

// terminateAgain asks HCS whether the system has stopped, and terminates
// it again if not.
func (s *system) terminateAgain(ctx context.Context) (stopped bool, _ error) {
	stopped, err := s.c.CheckStopped(ctx)
	if stopped {
		return true, nil
	}
	if err != nil {
		log.G(ctx).WithError(err).WithField("id", s.id).Debug("ask HCS whether a compute system being terminated has stopped")
	}
	if err := s.c.Terminate(ctx); err != nil {
		return false, s.fail("terminate", err)
	}
	return false, nil
}

// terminated ends a termination with the system stopped: a system the
// shim closed meanwhile has its handle closed and what it held released.
func (s *system) terminated(e Termination) {
	logger := log.L.WithFields(log.Fields{"id": s.id, "attempts": e.Attempts})
	if !e.Closed {
		return
	}
	if err := s.closeHandle(); err != nil {
		logger.WithError(err).Warn("close a compute system terminated in the background")
	}
	if err := s.releaseHeld(); err != nil {
		logger.WithError(err).Warn("release what a compute system terminated in the background held")
		return
	}
	logger.Info("a compute system terminated in the background has stopped; what it held is released")
}

// gaveUp ends a termination with the system still running: it logs what
// is left. A system the shim closed has its handle closed, with which HCS
// terminates it if it can; its record stays.
func (s *system) gaveUp(e Termination) {
	logger := log.L.WithFields(log.Fields{"id": s.id, "attempts": e.Attempts, "since": e.Since})
	if e.LastError != nil {
		logger = logger.WithError(e.LastError)
	}
	if s.held.Scratch != "" {
		logger = logger.WithFields(log.Fields{"scratch": s.held.Scratch, "record": s.b.records.path(s.id)})
	}
	logger.Error("gave up terminating a compute system; it is left on the host with its scratch layer and record, for the shim's delete or a sweep of orphans")
	if e.Closed {
		if err := s.closeHandle(); err != nil {
			logger.WithError(err).Warn("close a compute system given up on")
		}
	}
}

// pendingTerminationsDir is where a backend of stateDir records its
// pending terminates; "" (no state directory) records none.
func pendingTerminationsDir(stateDir string) winrecord.Dir {
	if stateDir == "" {
		return ""
	}
	return winrecord.Dir(filepath.Join(stateDir, pendingDir))
}
