//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/log"
)

// A teardown that cannot finish at once (a silo whose processes ignore
// SIGKILL for a while, a cgroup that stays busy) is not waited for by
// Close, and not given up either: it is carried on in the background,
// tried again every carryOnEvery for at most carryOnFor, and recorded in
// the system's state.json meanwhile (PendingTeardowns, `winproc doctor`'s
// terminations check). One that is still unfinished then is logged and left
// to the shim's delete or `winproc doctor -fix` (an orphan once its shim
// has exited). The Backend owns the goroutines: Drain waits for them.

const (
	// carryOnEvery is how often a carried-on teardown is tried again.
	carryOnEvery = time.Second
	// carryOnFor bounds how long it is tried.
	carryOnFor = 10 * time.Minute
	// carryOnAttempt bounds one attempt.
	carryOnAttempt = 5 * time.Second
)

// teardownRecord is state.json's record of a teardown carried on.
type teardownRecord struct {
	Attempts  int       `json:"attempts"`
	LastError string    `json:"lastError"`
	Since     time.Time `json:"since"`
}

// PendingTeardown is a system whose teardown is being carried on.
type PendingTeardown struct {
	ID        string
	Attempts  int
	LastError string
	Since     time.Time
}

// carrier tracks a Backend's teardowns carried on, by system id.
type carrier struct {
	mu      sync.Mutex
	pending map[string]chan struct{} // closed when the teardown has ended
}

// carryOn tears the stopped or terminated system id in dir down in the
// background, after the attempt that failed with err; release is called
// at the end. st is the carrier's own copy.
func (b *Backend) carryOn(id, dir string, st *persisted, err error, release func()) {
	b.carry.mu.Lock()
	if _, ok := b.carry.pending[id]; ok {
		b.carry.mu.Unlock()
		release()
		return
	}
	if b.carry.pending == nil {
		b.carry.pending = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	b.carry.pending[id] = done
	b.carry.mu.Unlock()

	st.Teardown = &teardownRecord{Attempts: 1, LastError: err.Error(), Since: time.Now()}
	logger := log.L.WithField("system", id)
	if serr := saveState(dir, st); serr != nil && !errors.Is(serr, fs.ErrNotExist) {
		logger.WithError(serr).Warn("emulation: record the pending teardown")
	}
	logger.WithError(err).Warn("emulation: the teardown could not finish; carrying it on in the background")
	go func() {
		defer func() {
			release()
			b.carry.mu.Lock()
			delete(b.carry.pending, id)
			b.carry.mu.Unlock()
			close(done)
		}()
		b.carryOnLoop(id, dir, st, logger)
	}()
}

// carryOnLoop tries the teardown every carryOnEvery until it succeeds or
// carryOnFor has passed.
func (b *Backend) carryOnLoop(id, dir string, st *persisted, logger *log.Entry) {
	giveUp := time.Now().Add(carryOnFor)
	for time.Now().Before(giveUp) {
		time.Sleep(carryOnEvery)
		err := b.teardownAttempt(dir, st)
		if err == nil {
			logger.WithField("attempts", st.Teardown.Attempts+1).Info("emulation: the carried-on teardown finished")
			return
		}
		st.Teardown.Attempts++
		st.Teardown.LastError = err.Error()
		if serr := saveState(dir, st); serr != nil && !errors.Is(serr, fs.ErrNotExist) {
			logger.WithError(serr).Warn("emulation: record the pending teardown")
		}
	}
	logger.WithFields(log.Fields{
		"attempts":  st.Teardown.Attempts,
		"lastError": st.Teardown.LastError,
		"since":     st.Teardown.Since,
	}).Errorf("emulation: gave up tearing the system down after %v; the shim's delete or `winproc doctor -fix` removes it", carryOnFor)
}

// teardownAttempt kills what is left of the silo and tears it down, within
// carryOnAttempt.
func (b *Backend) teardownAttempt(dir string, st *persisted) error {
	ctx, cancel := context.WithTimeout(context.Background(), carryOnAttempt)
	defer cancel()
	// A HostProcess container has a cgroup (Create refuses it otherwise),
	// which names its processes.
	if err := killSilo(ctx, st.Cgroup, filepath.Join(dir, prefixDir)); err != nil {
		return err
	}
	if err := b.removeSystem(ctx, dir, st); err != nil {
		return err
	}
	b.reaper.poke()
	return nil
}

// Drain waits for the teardowns carried on in the background to end,
// bounded by ctx (compute.Drainer).
func (b *Backend) Drain(ctx context.Context) error {
	for {
		b.carry.mu.Lock()
		var ids []string
		var wait chan struct{}
		for id, done := range b.carry.pending {
			ids, wait = append(ids, id), done
		}
		b.carry.mu.Unlock()
		if wait == nil {
			return nil
		}
		select {
		case <-wait:
		case <-ctx.Done():
			slices.Sort(ids)
			return fmt.Errorf("emulation: teardowns of %s still pending: %w", strings.Join(ids, ", "), ctx.Err())
		}
	}
}

// PendingTeardowns lists the systems under root (a Backend's Root) whose
// teardown is carried on, or was given up, as their state.json records.
func PendingTeardowns(root string) ([]PendingTeardown, error) {
	ids, err := systemEntries(root)
	if err != nil {
		return nil, fmt.Errorf("emulation: pending teardowns: %w", err)
	}
	var out []PendingTeardown
	for _, id := range ids {
		st, err := loadState(filepath.Join(root, id))
		if err != nil || st.Teardown == nil {
			continue
		}
		out = append(out, PendingTeardown{ID: id, Attempts: st.Teardown.Attempts, LastError: st.Teardown.LastError, Since: st.Teardown.Since})
	}
	return out, nil
}

// systemEntries are the names of the directories under root (a Backend's
// Root: its systems and the host prefix's): none when root does not
// exist.
func systemEntries(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}
