package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/process"
)

// Teardown limits when the init process exits, as runhcs: a graceful
// shutdown of the compute system, then a terminate.
const (
	shutdownTimeout  = 30 * time.Second
	terminateTimeout = 30 * time.Second
)

// container is one task: a compute system, its init process and its execs.
type container struct {
	id     string
	bundle string
	system compute.System
	init   *process.Process
	// hostProcess is set for a HostProcess container, whose execs'
	// working directories are read as its init's.
	hostProcess bool
	// release frees what the task's rootfs holds beyond the compute system
	// (the sandbox's pause snapshot and lease); nil for containerd's tasks,
	// whose rootfs containerd owns.
	release func(context.Context) error

	// killed is set once the task's init is SIGKILLed: its teardown
	// terminates the system at once, as a kill asks, with no graceful
	// shutdown of the rest first.
	killed atomic.Bool

	// resizeMu orders the task's updates; limits are the limits it has
	// now (created with, then as updated), what a failed update restores.
	resizeMu sync.Mutex
	limits   compute.Resources

	mu    sync.Mutex
	execs map[string]*process.Process
}

// process returns the init process for an empty execID, else that exec.
func (c *container) process(execID string) (*process.Process, error) {
	if execID == "" {
		return c.init, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.execs[execID]
	if !ok {
		return nil, fmt.Errorf("exec %s of task %s: %w", execID, c.id, errdefs.ErrNotFound)
	}
	return p, nil
}

func (c *container) addExec(p *process.Process) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.execs[p.ID()]; ok {
		return fmt.Errorf("exec %s of task %s: %w", p.ID(), c.id, errdefs.ErrAlreadyExists)
	}
	c.execs[p.ID()] = p
	return nil
}

func (c *container) removeExec(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.execs, id)
}

func (c *container) execList() []*process.Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := make([]*process.Process, 0, len(c.execs))
	for _, p := range c.execs {
		list = append(list, p)
	}
	return list
}

// teardown is the init process's exit hook. The container's exit is final
// only after it: every exec is ended, the compute system is shut down (or
// terminated), and its layers and mounts are released, so that containerd's
// Wait returns on a clean node (runhcs orders it the same way).
func (c *container) teardown(ctx context.Context, _ *process.Process, status uint32) uint32 {
	logger := log.G(ctx).WithField("task", c.id)
	for _, e := range c.execList() {
		if err := e.Kill(ctx, uint32(syscall.SIGKILL)); err != nil && !errdefs.IsNotFound(err) {
			logger.WithError(err).WithField("exec", e.ID()).Warn("kill exec of exited task")
		}
	}
	grace := shutdownTimeout
	if g, ok := c.system.(compute.ShutdownGracer); ok {
		grace = g.ShutdownGrace()
	}
	err := errKilled
	if !c.killed.Load() {
		err = stopSystem(ctx, c.system, c.system.Shutdown, grace)
	}
	if err != nil {
		logger.WithError(err).Info("graceful shutdown failed or not asked for; terminating")
		if err := stopSystem(ctx, c.system, c.system.Terminate, terminateTimeout); err != nil {
			logger.WithError(err).Error("terminate compute system")
		}
	}
	for _, e := range c.execList() {
		// Exec exits publish and record themselves; wait so that none is
		// left running against a closed system.
		waitCtx, cancel := context.WithTimeout(ctx, terminateTimeout)
		if _, _, err := e.Wait(waitCtx); err != nil {
			logger.WithError(err).WithField("exec", e.ID()).Warn("exec did not end with its task")
		}
		cancel()
	}
	if err := c.system.Close(); err != nil {
		logger.WithError(err).Error("release compute system")
	}
	if c.release != nil {
		if err := c.release(ctx); err != nil {
			logger.WithError(err).Error("release rootfs")
		}
	}
	return status
}

// errKilled is why a killed task's system is terminated with no shutdown.
var errKilled = errors.New("the task was killed")

// stopSystem asks the system to stop and waits for it, within timeout.
func stopSystem(ctx context.Context, sys compute.System, stop func(context.Context) error, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case <-sys.Wait():
		return nil
	default:
	}
	if err := stop(ctx); err != nil {
		return err
	}
	select {
	case <-sys.Wait():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("compute system did not stop within %v: %w", timeout, ctx.Err())
	}
}
