// Package procexit keeps a compute process's end as the Windows backends
// (shim/hcs, shim/jobcontainer) report it through compute.Process: whether
// it has exited, whether it was closed, its exit code or why there is none,
// and when its output has been copied. The backends differ in how they
// learn the exit; what they answer about it is this package's.
package procexit

import (
	"fmt"
	"sync"

	"github.com/containerd/errdefs"
)

// Exit is one process's end. Its methods are safe for concurrent use.
type Exit struct {
	pid    int
	exited chan struct{} // closed once the exit is known
	done   chan struct{} // closed once the exit is known and the output copied

	mu     sync.Mutex
	closed bool
	code   int
	err    error
}

// New is the end of process pid, not yet known.
func New(pid int) *Exit {
	return &Exit{pid: pid, exited: make(chan struct{}), done: make(chan struct{})}
}

// Close records that the process was closed; it reports whether it was
// the first call.
func (e *Exit) Close() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := !e.closed
	e.closed = true
	return first
}

// Closed reports whether Close was called.
func (e *Exit) Closed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// Check fails for a process that was closed (FailedPrecondition) or has
// exited (NotFound): no request reaches it any more.
func (e *Exit) Check() error {
	if e.Closed() {
		return fmt.Errorf("process %d has been closed: %w", e.pid, errdefs.ErrFailedPrecondition)
	}
	select {
	case <-e.exited:
		return fmt.Errorf("process %d has exited: %w", e.pid, errdefs.ErrNotFound)
	default:
		return nil
	}
}

// Record records the exit code, or err, why there is none; then Exited is
// closed. It is called once.
func (e *Exit) Record(code int, err error) {
	e.mu.Lock()
	e.code, e.err = code, err
	e.mu.Unlock()
	close(e.exited)
}

// Exited is closed once the exit is known.
func (e *Exit) Exited() <-chan struct{} { return e.exited }

// Done closes Wait: the exit is known and the output copied. It is called
// once, after Record.
func (e *Exit) Done() { close(e.done) }

// Wait is closed once the process has exited and its output is copied.
func (e *Exit) Wait() <-chan struct{} { return e.done }

// ExitCode is the exit code once Wait is closed; -1 with the reason when
// there is none.
func (e *Exit) ExitCode() (int, error) {
	select {
	case <-e.done:
	default:
		return -1, fmt.Errorf("process %d has not exited: %w", e.pid, errdefs.ErrFailedPrecondition)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return -1, e.err
	}
	return e.code, nil
}
