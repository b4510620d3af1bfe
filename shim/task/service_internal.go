package task

import (
	"context"
	"fmt"
	"syscall"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/process"
)

// The task service's logic, in native Go: the RPC methods (service.go)
// only unwrap requests, call these and map errors to gRPC; the sandbox
// service calls them directly. Errors carry errdefs classes.

// StartProcess starts the init process of task id (and with it the
// compute system) or its exec execID, and returns the pid.
func (s *Service) StartProcess(ctx context.Context, id, execID string) (uint32, error) {
	c, p, err := s.process(id, execID)
	if err != nil {
		return 0, err
	}
	if execID == "" {
		if st := p.State(); st.Status != task.Status_CREATED {
			return 0, fmt.Errorf("task %s is not created (it is %v): %w", id, st.Status, errdefs.ErrFailedPrecondition)
		}
		if err := c.system.Start(ctx); err != nil {
			return 0, fmt.Errorf("start compute system of task %s: %w", id, err)
		}
	} else if st := c.init.State(); st.Status != task.Status_RUNNING {
		return 0, fmt.Errorf("task %s is not running; cannot start exec %s: %w", id, execID, errdefs.ErrFailedPrecondition)
	}
	if err := p.Start(ctx, c.system); err != nil {
		return 0, err
	}
	pid := p.State().Pid
	if execID == "" {
		s.publish(ctx, runtime.TaskStartEventTopic, &eventstypes.TaskStart{ContainerID: id, Pid: pid})
	} else {
		s.publish(ctx, runtime.TaskExecStartedEventTopic, &eventstypes.TaskExecStarted{ContainerID: id, ExecID: execID, Pid: pid})
	}
	return pid, nil
}

// DeleteProcess removes an exited exec, or an exited (or never started)
// task, and returns its final state.
func (s *Service) DeleteProcess(ctx context.Context, id, execID string) (process.State, error) {
	c, p, err := s.process(id, execID)
	if err != nil {
		return process.State{}, err
	}
	if err := p.CheckDeletable(); err != nil {
		return process.State{}, err
	}
	if st := p.State(); st.Status == task.Status_CREATED {
		// Never started: end it, which for init releases the system.
		if err := p.Kill(ctx, uint32(syscall.SIGKILL)); err != nil {
			return process.State{}, err
		}
	}
	if _, _, err := p.Wait(ctx); err != nil {
		return process.State{}, err
	}
	st := p.State()
	if execID != "" {
		c.removeExec(execID)
		return st, nil
	}
	s.mu.Lock()
	delete(s.containers, id)
	s.mu.Unlock()
	s.publish(ctx, runtime.TaskDeleteEventTopic, &eventstypes.TaskDelete{
		ContainerID: id,
		Pid:         st.Pid,
		ExitStatus:  st.ExitStatus,
		ExitedAt:    protobuf.ToTimestamp(st.ExitedAt),
		ID:          id,
	})
	return st, nil
}

// ProcessState is a process's state and its task's bundle.
func (s *Service) ProcessState(id, execID string) (bundle string, st process.State, err error) {
	c, p, err := s.process(id, execID)
	if err != nil {
		return "", process.State{}, err
	}
	return c.bundle, p.State(), nil
}

// KillProcess signals a process; with all, for an init process, every
// exec of the task first.
func (s *Service) KillProcess(ctx context.Context, id, execID string, signal uint32, all bool) error {
	c, p, err := s.process(id, execID)
	if err != nil {
		return err
	}
	if all && execID == "" {
		for _, e := range c.execList() {
			if err := e.Kill(ctx, signal); err != nil && !errdefs.IsNotFound(err) {
				return fmt.Errorf("kill exec %s of task %s: %w", e.ID(), id, err)
			}
		}
	}
	return p.Kill(ctx, signal)
}

// WaitProcess returns once the process's exit is final.
func (s *Service) WaitProcess(ctx context.Context, id, execID string) (exit uint32, exitedAt time.Time, err error) {
	_, p, err := s.process(id, execID)
	if err != nil {
		return 0, time.Time{}, err
	}
	return p.Wait(ctx)
}

// ShutdownIfIdle stops the shim unless it still holds a task.
func (s *Service) ShutdownIfIdle() {
	s.mu.Lock()
	n := len(s.containers)
	s.mu.Unlock()
	if n == 0 {
		s.shutdown.Shutdown()
	}
}
