package hcs

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
)

// The fake HCS's fault plan: the failures users of Windows containers
// report, injected at the binding. A fault is set on a call by the fake's
// name of it (create, open, start, shutdown, terminate, properties,
// statistics, processList, modify, createProcess, processInfo,
// openProcess, processProperties, signal, kill, resize, closeStdin,
// ccgAddInstance, ...) or on a notification (systemExited, processExited),
// and holds from inject until it clears.

// HRESULTs users hit. HCS's own codes are errors.go's (the fake's
// constants in fake_test.go name a few more).
const (
	hrTimeout          = syscall.Errno(0x800705B4) // ERROR_TIMEOUT: an operation that hung
	hrAccessDenied     = syscall.Errno(0x80070005) // E_ACCESSDENIED
	hrInvalidState     = syscall.Errno(0x80370000 | hcsInvalidState)
	hrAlreadyExists    = syscall.Errno(0x80370000 | hcsSystemAlreadyExists)
	hrSystemNotFound   = syscall.Errno(0x80370000 | hcsSystemNotFound)
	hrDisconnect       = syscall.Errno(0x80370000 | hcsServiceDisconnect)
	hrTerminatedInBoot = syscall.Errno(0x80370100) // HCS_E_TERMINATED_DURING_START
	hrUnexpectedExit   = syscall.Errno(0xC0370106) // hcsshim's ErrVmcomputeUnexpectedExit
)

// A fault is what the fake does for a call or a notification while it
// holds.
type fault struct {
	// call: the call fails at once with this HRESULT.
	call error
	// op: the call's operation completes with this HRESULT.
	op error
	// stall: the operation does not complete until it is cancelled (or
	// the fault clears). deaf: cancelling does not end it either; it
	// completes, as if nothing happened, when the fault clears.
	stall, deaf bool
	// exit: the system exits during the operation (create, start), with
	// status (nil: 0).
	exit   bool
	status error
	// For a notification: lost, it never comes; twice, it comes twice;
	// late, it comes when the fault clears.
	lost, twice, late bool
	// hold: a console event's call lasts until the process exits, and
	// the calls on its handle wait behind it.
	hold bool
}

type activeFault struct {
	fault
	cleared chan struct{}
}

// inject sets f on name until the returned clear is called, or the test
// ends.
func (a *fakeAPI) inject(t *testing.T, name string, f fault) (clear func()) {
	af := &activeFault{fault: f, cleared: make(chan struct{})}
	a.mu.Lock()
	if a.faults == nil {
		a.faults = make(map[string]*activeFault)
	}
	a.faults[name] = af
	a.mu.Unlock()
	var once sync.Once
	clear = func() {
		once.Do(func() {
			a.mu.Lock()
			if a.faults[name] == af {
				delete(a.faults, name)
			}
			a.mu.Unlock()
			close(af.cleared)
		})
	}
	t.Cleanup(clear)
	return clear
}

func (a *fakeAPI) faultOf(name string) *activeFault {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.faults[name]
}

// stalled holds an operation of name as its fault says, and reports
// whether the operation was cancelled meanwhile.
func (f *activeFault) stalled(o *fakeOp) (canceled bool) {
	switch {
	case f == nil || !f.stall && !f.deaf:
		return false
	case f.deaf:
		<-f.cleared
		return false
	}
	select {
	case <-o.canceled:
		return true
	case <-f.cleared:
		return false
	}
}

// notify delivers notification t (the fake's name for it: systemExited,
// processExited) to the listeners keys, as its fault says.
func (a *fakeAPI) notify(name string, keys []uintptr, t eventType, data string) {
	f := a.faultOf(name)
	for _, k := range keys {
		switch {
		case f == nil:
			go hcsEvents.deliver(k, t, data)
		case f.lost:
		case f.late:
			go func() {
				<-f.cleared
				hcsEvents.deliver(k, t, data)
			}()
		case f.twice:
			go func() {
				hcsEvents.deliver(k, t, data)
				hcsEvents.deliver(k, t, data)
			}()
		}
	}
}

// leaks lists what the fake's HCS still has of the test: systems running,
// and system and process handles open.
func (a *fakeAPI) leaks() []string {
	a.mu.Lock()
	var out []string
	for id, s := range a.existing {
		if !s.isStopped() {
			out = append(out, "compute system "+id+" is running")
		}
	}
	a.mu.Unlock()
	slices.Sort(out)
	if n := a.hcs.open(); n != 0 {
		out = append(out, fmt.Sprintf("%d HCS handles are open: %v", n, a.hcs.openList()))
	}
	return out
}

// openList names the handles open, for leaks.
func (h *fakeHCS) openList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for x, v := range h.handles {
		switch v := v.(type) {
		case *fakeOp:
			out = append(out, fmt.Sprintf("operation %d on %d", x, v.target))
		case *fakeSystem:
			if !h.closed[x] {
				out = append(out, fmt.Sprintf("system %s (%d)", v.id, x))
			}
		case *fakeProcess:
			if !h.closed[x] {
				out = append(out, fmt.Sprintf("process %d (%d)", v.pid, x))
			}
		}
	}
	slices.Sort(out)
	return out
}
