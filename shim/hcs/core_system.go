package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// coreHandle is what a system's and a process's handle share: the handle
// until Close, the listener of its notifications, and its exit once known.
//
// Every call that passes the handle to HCS holds calls for reading, and
// Close holds it for writing while it takes the handle: a handle is never
// closed while HCS is still using it. HCS faults inside computecore.dll on
// a handle torn down mid-call (hcsshim takes the same lock for the same
// reason), and that would take the shim and every container of the pod
// with it.
type coreHandle struct {
	key      uintptr
	exited   chan struct{} // closed once the exit is known
	closedCh chan struct{} // closed by Close

	calls sync.RWMutex

	mu      sync.Mutex
	h       hcsHandle // 0 once closed
	exitErr error
	once    sync.Once
}

func newCoreHandle(h hcsHandle) coreHandle {
	return coreHandle{h: h, exited: make(chan struct{}), closedCh: make(chan struct{})}
}

// use runs f with the open handle, which stays open until f returns; it
// is errHandleClosed once Close has taken the handle. f must not call use
// again (a waiting Close would block it).
func (c *coreHandle) use(f func(h hcsHandle) error) error {
	c.calls.RLock()
	defer c.calls.RUnlock()
	h, err := c.handle()
	if err != nil {
		return err
	}
	return f(h)
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

// take takes the handle for closing once no call uses it, and stops the
// notifications; the caller closes it, then calls closed.
func (c *coreHandle) take() (hcsHandle, error) {
	c.calls.Lock()
	c.mu.Lock()
	h := c.h
	c.h = 0
	c.mu.Unlock()
	c.calls.Unlock()
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
	return s.use(func(h hcsHandle) error {
		_, err := s.c.run(ctx, func(op hcsHandle) error { return s.c.api.startComputeSystem(h, op) })
		return err
	})
}

func (s *coreSystem) Shutdown(ctx context.Context) error {
	return s.use(func(h hcsHandle) error {
		return s.c.submit(func(op hcsHandle) error { return s.c.api.shutDownComputeSystem(h, op) })
	})
}

func (s *coreSystem) Terminate(ctx context.Context) error {
	return s.use(func(h hcsHandle) error {
		return s.c.submit(func(op hcsHandle) error { return s.c.api.terminateComputeSystem(h, op) })
	})
}

// Wait returns once the system has exited (nil, or why it failed), or
// once the handle was closed (errHandleClosed).
func (s *coreSystem) Wait() error { return s.wait() }

// Properties queries the property types asked for.
func (s *coreSystem) Properties(ctx context.Context, types ...string) (*schema2.Properties, error) {
	q, err := json.Marshal(schema2.PropertyQuery{PropertyTypes: types})
	if err != nil {
		return nil, err
	}
	var doc string
	if err := s.use(func(h hcsHandle) error {
		doc, err = s.c.run(ctx, func(op hcsHandle) error { return s.c.api.getComputeSystemProperties(h, op, string(q)) })
		return err
	}); err != nil {
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
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return s.use(func(h hcsHandle) error {
		_, err := s.c.run(ctx, func(op hcsHandle) error { return s.c.api.modifyComputeSystem(h, op, string(b)) })
		return err
	})
}

// SetAffinity pins the silo's processors.
func (s *coreSystem) SetAffinity(a []groupAffinity) error {
	return s.use(func(hcsHandle) error { return s.c.api.setSiloAffinity(s.id, a) })
}

// CreateProcess starts a process, takes its pipes, and follows its exit.
func (s *coreSystem) CreateProcess(ctx context.Context, params *schema2.ProcessParameters) (hcsProcess, error) {
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var ph hcsHandle
	var pipes processPipes
	err = s.use(func(h hcsHandle) error {
		ph, pipes, err = s.c.createProcess(ctx, h, string(b))
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.c.newProcess(ctx, s.id, ph, pipes)
}

// createProcess creates a process in the system h and takes its pipes.
//
// On process-isolated containers HCS's wait for the create can fail
// (E_INVALIDARG, seen on Windows Server 2022) although the process was
// made and its handle is valid. hcsshim (internal/hcs/v2 createProcess)
// recovers through HcsGetProcessInfo, only after a failed wait: asking
// again after a good one races a short process's exit. So does this.
func (c *computeCore) createProcess(ctx context.Context, h hcsHandle, params string) (hcsHandle, processPipes, error) {
	var ph hcsHandle
	var pipes processPipes
	err := c.runWith(ctx, func(op hcsHandle) error {
		var err error
		ph, err = c.api.createProcess(h, params, op)
		return err
	}, func(op hcsHandle) error {
		var doc string
		var err error
		pipes, doc, err = c.api.waitOperationProcess(op, infiniteTimeout)
		return withResult(err, doc)
	})
	if err == nil {
		return ph, pipes, nil
	}
	closePipes(pipes)
	pipes = processPipes{}
	if ph == 0 {
		return 0, pipes, err
	}
	var stdio *stdioError
	if ctx.Err() == nil && !errors.As(err, &stdio) {
		rerr := c.runWith(ctx, func(op hcsHandle) error { return c.api.getProcessInfo(ph, op) }, func(op hcsHandle) error {
			var doc string
			var err error
			pipes, doc, err = c.api.waitOperationProcess(op, infiniteTimeout)
			return withResult(err, doc)
		})
		if rerr == nil {
			log.G(ctx).WithError(err).WithField("pid", pipes.pid).Debug("HCS's wait for a process it created failed; its information came from HcsGetProcessInfo")
			return ph, pipes, nil
		}
		closePipes(pipes)
		pipes = processPipes{}
		// The recovery's failure would hide why the create failed.
		log.G(ctx).WithError(rerr).Debug("HcsGetProcessInfo after a failed create")
	}
	// HCS may have started it: without its pipes it is of no use.
	_ = c.submit(func(op hcsHandle) error { return c.api.terminateProcess(ph, op) })
	c.api.closeProcess(ph)
	return 0, pipes, err
}

// Close closes the handle once no call uses it; Wait then returns
// errHandleClosed unless the system had exited.
func (s *coreSystem) Close() error {
	h, err := s.take()
	if err != nil {
		return err
	}
	s.c.api.closeComputeSystem(h)
	s.closed()
	return nil
}
