package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// coreHandle is what a system's and a process's handle share: the handle
// until Close, the listener of its notifications, and its exit once known.
//
// Every call that passes the handle to HCS holds it (acquire) until HCS
// has finished with the call, its operation included; Close takes the
// handle from new calls and closes it once the last holder let go. A
// handle is never closed while HCS is still using it: HCS faults inside
// computecore.dll on a handle torn down mid-call (hcsshim takes a lock for
// the same reason), and that would take the shim and every container of
// the pod with it. An operation left to HCS (runWith) holds the handle
// until HCS ends it, so Close does not wait for the holders: it would wait
// as long as HCS hangs.
type coreHandle struct {
	key      uintptr
	exited   chan struct{} // closed once the exit is known
	closedCh chan struct{} // closed by Close

	mu      sync.Mutex
	h       hcsHandle // 0 once Close took it
	holders int       // calls HCS has not finished with
	closeFn func()    // set by Close while holders > 0: closes the handle
	exitErr error
	once    sync.Once
}

func newCoreHandle(h hcsHandle) coreHandle {
	return coreHandle{h: h, exited: make(chan struct{}), closedCh: make(chan struct{})}
}

// acquire holds the open handle for one call; release lets it go, once
// HCS has finished with the call. It is errHandleClosed once Close has
// taken the handle.
func (c *coreHandle) acquire() (h hcsHandle, release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.h == 0 {
		return 0, nil, errHandleClosed
	}
	c.holders++
	var once sync.Once
	return c.h, func() { once.Do(c.let) }, nil
}

func (c *coreHandle) let() {
	c.mu.Lock()
	c.holders--
	var closeFn func()
	if c.holders == 0 {
		closeFn, c.closeFn = c.closeFn, nil
	}
	c.mu.Unlock()
	if closeFn != nil {
		closeFn()
	}
}

// use runs f with the open handle, held until f returns.
func (c *coreHandle) use(f func(h hcsHandle) error) error {
	h, release, err := c.acquire()
	if err != nil {
		return err
	}
	defer release()
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

// closeWith takes the handle from new calls, stops the notifications, and
// has closeFn close it: now, or when the last call HCS still works on
// lets go of it.
func (c *coreHandle) closeWith(closeFn func(hcsHandle)) error {
	c.mu.Lock()
	h := c.h
	if h == 0 {
		c.mu.Unlock()
		return errHandleClosed
	}
	c.h = 0
	now := c.holders == 0
	if !now {
		c.closeFn = func() { closeFn(h) }
	}
	c.mu.Unlock()
	hcsEvents.remove(c.key)
	if now {
		closeFn(h)
	}
	close(c.closedCh)
	return nil
}

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
		return nil, named("HcsSetComputeSystemCallback", err)
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
	_, err := s.c.runOn(ctx, &s.coreHandle, "HcsStartComputeSystem", s.c.api.startComputeSystem)
	return err
}

func (s *coreSystem) Shutdown(ctx context.Context) error {
	return s.use(func(h hcsHandle) error {
		return s.c.submit("HcsShutDownComputeSystem", func(op hcsHandle) error { return s.c.api.shutDownComputeSystem(h, op) })
	})
}

func (s *coreSystem) Terminate(ctx context.Context) error {
	return s.use(func(h hcsHandle) error {
		return s.c.submit("HcsTerminateComputeSystem", func(op hcsHandle) error { return s.c.api.terminateComputeSystem(h, op) })
	})
}

// CheckStopped asks HCS whether the system has stopped, for a stop whose
// notification may never come (HCS lost it, or the system stopped before
// the callback was set): a system HCS reports stopped, or no longer
// finds, has its exit recorded, and Wait returns.
func (s *coreSystem) CheckStopped(ctx context.Context) (bool, error) {
	if s.hasExited() {
		return true, nil
	}
	doc, err := s.c.runOn(ctx, &s.coreHandle, "HcsGetComputeSystemProperties", func(h, op hcsHandle) error {
		return s.c.api.getComputeSystemProperties(h, op, "")
	})
	var props schema2.Properties
	switch {
	case err != nil && coreFacts(err).NotExist:
	case err != nil:
		return false, err
	case json.Unmarshal([]byte(doc), &props) != nil || !(props.Stopped || props.State == "Stopped"):
		return false, nil
	}
	// The exit notification, which alone carries the exit's status (a
	// system that died during its start), is usually on its way on HCS's
	// thread: it is taken if it comes within exitNotifyGrace.
	select {
	case <-s.exited:
	case <-ctx.Done():
	case <-time.After(exitNotifyGrace):
	}
	s.exit(nil, nil)
	return true, nil
}

// exitNotifyGrace is how long CheckStopped waits for the exit
// notification of a system HCS reports stopped.
const exitNotifyGrace = 500 * time.Millisecond

// Wait returns once the system has exited (nil, or why it failed), or
// once the handle was closed (errHandleClosed).
func (s *coreSystem) Wait() error { return s.wait() }

// Properties queries the property types asked for.
func (s *coreSystem) Properties(ctx context.Context, types ...string) (*schema2.Properties, error) {
	q, err := json.Marshal(schema2.PropertyQuery{PropertyTypes: types})
	if err != nil {
		return nil, err
	}
	doc, err := s.c.runOn(ctx, &s.coreHandle, "HcsGetComputeSystemProperties", func(h, op hcsHandle) error {
		return s.c.api.getComputeSystemProperties(h, op, string(q))
	})
	if err != nil {
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
	_, err = s.c.runOn(ctx, &s.coreHandle, "HcsModifyComputeSystem", func(h, op hcsHandle) error {
		return s.c.api.modifyComputeSystem(h, op, string(b))
	})
	return err
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
	h, release, err := s.acquire()
	if err != nil {
		return nil, err
	}
	ph, pipes, err := s.c.createProcess(ctx, h, string(b), release)
	if err != nil {
		return nil, err
	}
	return s.c.newProcess(ctx, s.id, ph, pipes)
}

// createProcess creates a process in the system h and takes its pipes;
// release lets go of h once HCS has finished with the calls on it.
//
// On process-isolated containers HCS's wait for the create can fail
// (E_INVALIDARG, seen on Windows Server 2022) although the process was
// made and its handle is valid. hcsshim (internal/hcs/v2 createProcess)
// recovers through HcsGetProcessInfo, only after a failed wait: asking
// again after a good one races a short process's exit. So does this.
func (c *computeCore) createProcess(ctx context.Context, h hcsHandle, params string, release func()) (hcsHandle, processPipes, error) {
	var ph hcsHandle
	var pipes processPipes
	err := c.runWith(ctx, "HcsCreateProcess", func(op hcsHandle) error {
		var err error
		ph, err = c.api.createProcess(h, params, op)
		return err
	}, func(op hcsHandle) error {
		var doc string
		var err error
		pipes, doc, err = c.api.waitOperationProcess(op, infiniteTimeout)
		return withResult(err, doc)
	}, func(_ error, left bool) {
		if left {
			// Given up on: whatever HCS made is of no use.
			c.discardProcess(ph, pipes)
			release()
		}
	})
	switch {
	case errors.Is(err, errOperationLeft):
		return 0, processPipes{}, err
	case err == nil:
		release()
		return ph, pipes, nil
	}
	closePipes(pipes)
	var stdio *stdioError
	if ph != 0 && ctx.Err() == nil && !errors.As(err, &stdio) {
		var info processPipes
		rerr := c.runWith(ctx, "HcsGetProcessInfo", func(op hcsHandle) error { return c.api.getProcessInfo(ph, op) }, func(op hcsHandle) error {
			var doc string
			var err error
			info, doc, err = c.api.waitOperationProcess(op, infiniteTimeout)
			return withResult(err, doc)
		}, func(_ error, left bool) {
			if left {
				c.discardProcess(ph, info)
				release()
			}
		})
		switch {
		case errors.Is(rerr, errOperationLeft):
			return 0, processPipes{}, err
		case rerr == nil:
			release()
			log.G(ctx).WithError(err).WithField("pid", info.pid).Debug("HCS's wait for a process it created failed; its information came from HcsGetProcessInfo")
			return ph, info, nil
		}
		closePipes(info)
		// The recovery's failure would hide why the create failed.
		log.G(ctx).WithError(rerr).Debug("HcsGetProcessInfo after a failed create")
	}
	// HCS may have started it: without its pipes it is of no use.
	c.discardProcess(ph, processPipes{})
	release()
	return 0, processPipes{}, err
}

// discardProcess terminates and closes a process handle the core will not
// use, and the pipes HCS handed over with it.
func (c *computeCore) discardProcess(ph hcsHandle, pipes processPipes) {
	closePipes(pipes)
	if ph == 0 {
		return
	}
	_ = c.submit("HcsTerminateProcess", func(op hcsHandle) error { return c.api.terminateProcess(ph, op) })
	c.api.closeProcess(ph)
}

// Close closes the handle once no call uses it; Wait then returns
// errHandleClosed unless the system had exited.
func (s *coreSystem) Close() error {
	return s.closeWith(s.c.api.closeComputeSystem)
}
