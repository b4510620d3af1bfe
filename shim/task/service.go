// Package task is the shim's task API (containerd.task.v3, and v2 through an
// adapter) over package process (process state) and package compute
// (compute systems), as containerd's runc shim is over its process and runc
// packages. One service holds every container of a pod.
//
// The package is split as hcsshim splits runhcs's: service.go is the RPC
// edge (request unwrapping, error mapping to gRPC), service_internal.go the
// service in native Go, which the sandbox service also calls; update.go is
// in-place resize (the memory check, the limits applied kind by kind and
// restored when one is refused).
package task

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/winproc/winproc/shim/process"
)

var _ taskAPI.TTRPCTaskService = (*Service)(nil)

// RegisterTTRPC serves both task API versions: containerd 2.x speaks v3,
// containerd 1.7 v2.
func (s *Service) RegisterTTRPC(server *ttrpc.Server) error {
	taskAPI.RegisterTTRPCTaskService(server, s)
	registerV2(server, s)
	return nil
}

// Create creates the container's compute system; its init process starts
// with Start.
func (s *Service) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (_ *taskAPI.CreateTaskResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	stdio := process.Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal}
	if err := s.CreateTask(ctx, r.ID, r.Bundle, mount.FromProto(r.Rootfs), stdio); err != nil {
		return nil, refusal(err)
	}
	// The event echoes containerd's request; the pause task, which
	// containerd did not ask for, has none.
	s.publish(ctx, runtime.TaskCreateEventTopic, &eventstypes.TaskCreate{
		ContainerID: r.ID,
		Bundle:      r.Bundle,
		Rootfs:      r.Rootfs,
		IO:          &eventstypes.TaskIO{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal},
		Checkpoint:  r.Checkpoint,
	})
	return &taskAPI.CreateTaskResponse{}, nil
}

// refusal classes a Create that a backend cannot do as a failed
// precondition: containerd takes an Unimplemented Create for a shim that
// lacks the task API's version and retries it with an older one
// (core/runtime/v2 task_manager.go), which then waits out the caller's
// deadline instead of naming what this node refuses.
func refusal(err error) error {
	if errdefs.IsNotImplemented(err) {
		return fmt.Errorf("%s: %w", err.Error(), errdefs.ErrFailedPrecondition)
	}
	return err
}

// Start starts the init process (and with it the compute system) or an exec.
func (s *Service) Start(ctx context.Context, r *taskAPI.StartRequest) (_ *taskAPI.StartResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	pid, err := s.StartProcess(ctx, r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	return &taskAPI.StartResponse{Pid: pid}, nil
}

// Delete removes an exited exec, or an exited (or never started) task.
func (s *Service) Delete(ctx context.Context, r *taskAPI.DeleteRequest) (_ *taskAPI.DeleteResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	st, err := s.DeleteProcess(ctx, r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	return &taskAPI.DeleteResponse{Pid: st.Pid, ExitStatus: st.ExitStatus, ExitedAt: protobuf.ToTimestamp(st.ExitedAt)}, nil
}

// Exec adds a process to a running task; it starts with Start.
func (s *Service) Exec(ctx context.Context, r *taskAPI.ExecProcessRequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	var spec *specs.Process
	if r.Spec != nil {
		spec = &specs.Process{}
		if err := json.Unmarshal(r.Spec.GetValue(), spec); err != nil {
			return nil, fmt.Errorf("decode the process spec of exec %s: %v: %w", r.ExecID, err, errdefs.ErrInvalidArgument)
		}
	}
	stdio := process.Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal}
	if err := s.ExecProcess(ctx, r.ID, r.ExecID, spec, stdio); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// State reports a process.
func (s *Service) State(ctx context.Context, r *taskAPI.StateRequest) (_ *taskAPI.StateResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	bundle, st, err := s.ProcessState(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	return &taskAPI.StateResponse{
		ID:         r.ID,
		ExecID:     r.ExecID,
		Bundle:     bundle,
		Pid:        st.Pid,
		Status:     st.Status,
		Stdin:      st.Stdio.Stdin,
		Stdout:     st.Stdio.Stdout,
		Stderr:     st.Stdio.Stderr,
		Terminal:   st.Stdio.Terminal,
		ExitStatus: st.ExitStatus,
		ExitedAt:   protobuf.ToTimestamp(st.ExitedAt),
	}, nil
}

// Pids lists the processes in the task's compute system; where the client
// decodes them (pidsWithDetails), each with runhcs's ProcessDetails, as
// runhcs's hcsTask.Pids.
func (s *Service) Pids(ctx context.Context, r *taskAPI.PidsRequest) (_ *taskAPI.PidsResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	list, err := s.ListProcesses(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	resp := &taskAPI.PidsResponse{}
	for _, p := range list {
		info := &task.ProcessInfo{Pid: p.Pid}
		if pidsWithDetails {
			if info.Info, err = typeurl.MarshalAnyToProto(ProcessDetails(p.ProcessInfo, p.ExecID)); err != nil {
				return nil, fmt.Errorf("process details of task %s: %w", r.ID, err)
			}
		}
		resp.Processes = append(resp.Processes, info)
	}
	return resp, nil
}

// Kill signals a process; with All, every exec of the task too.
func (s *Service) Kill(ctx context.Context, r *taskAPI.KillRequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if err := s.KillProcess(ctx, r.ID, r.ExecID, r.Signal, r.All); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// Wait returns once the process's exit is final.
func (s *Service) Wait(ctx context.Context, r *taskAPI.WaitRequest) (_ *taskAPI.WaitResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	exit, exitedAt, err := s.WaitProcess(ctx, r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	return &taskAPI.WaitResponse{ExitStatus: exit, ExitedAt: protobuf.ToTimestamp(exitedAt)}, nil
}

// ResizePty resizes a process's console.
func (s *Service) ResizePty(ctx context.Context, r *taskAPI.ResizePtyRequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if err := s.ResizeProcess(ctx, r.ID, r.ExecID, r.Width, r.Height); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// CloseIO closes a process's standard input.
func (s *Service) CloseIO(ctx context.Context, r *taskAPI.CloseIORequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if err := s.CloseProcessIO(ctx, r.ID, r.ExecID, r.Stdin); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// Update changes the task's CPU and memory limits.
func (s *Service) Update(ctx context.Context, r *taskAPI.UpdateTaskRequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	var res *specs.WindowsResources
	if r.Resources != nil {
		// A Linux build of containerd's CRI sends Linux resources, whose
		// JSON would half fit a Windows struct.
		if url := r.Resources.GetTypeUrl(); !strings.HasSuffix(url, "/WindowsResources") {
			return nil, fmt.Errorf("update of task %s: the resources are %s; a Windows container takes Windows resources (runtime-spec WindowsResources, which containerd's Windows CRI sends): %w", r.ID, url, errdefs.ErrInvalidArgument)
		}
		res = &specs.WindowsResources{}
		if err := typeurl.UnmarshalTo(r.Resources, res); err != nil {
			if err := json.Unmarshal(r.Resources.GetValue(), res); err != nil {
				return nil, fmt.Errorf("update of task %s: resources are not Windows resources: %v: %w", r.ID, err, errdefs.ErrInvalidArgument)
			}
		}
	}
	if err := s.UpdateTask(ctx, r.ID, res); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// Stats reports the task's compute system in runhcs's statistics format,
// which containerd's CRI decodes on Windows.
func (s *Service) Stats(ctx context.Context, r *taskAPI.StatsRequest) (_ *taskAPI.StatsResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	st, err := s.TaskStats(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	any, err := typeurl.MarshalAnyToProto(Statistics(st))
	if err != nil {
		return nil, err
	}
	return &taskAPI.StatsResponse{Stats: any}, nil
}

// Connect reports the shim and the task's init process.
func (s *Service) Connect(ctx context.Context, r *taskAPI.ConnectRequest) (_ *taskAPI.ConnectResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	resp := &taskAPI.ConnectResponse{ShimPid: uint32(os.Getpid())}
	if _, st, err := s.ProcessState(r.ID, ""); err == nil {
		resp.TaskPid = st.Pid
	}
	return resp, nil
}

// Shutdown stops the shim once it holds no task and no sandbox.
func (s *Service) Shutdown(ctx context.Context, r *taskAPI.ShutdownRequest) (*emptypb.Empty, error) {
	s.ShutdownIfIdle()
	return &emptypb.Empty{}, nil
}

// Pause is not available for Windows process isolation (as runhcs).
func (s *Service) Pause(context.Context, *taskAPI.PauseRequest) (*emptypb.Empty, error) {
	return nil, errgrpc.ToGRPC(fmt.Errorf("pause: %w", errdefs.ErrNotImplemented))
}

// Resume is not available for Windows process isolation (as runhcs).
func (s *Service) Resume(context.Context, *taskAPI.ResumeRequest) (*emptypb.Empty, error) {
	return nil, errgrpc.ToGRPC(fmt.Errorf("resume: %w", errdefs.ErrNotImplemented))
}

// Checkpoint is not available for Windows process isolation (as runhcs).
func (s *Service) Checkpoint(context.Context, *taskAPI.CheckpointTaskRequest) (*emptypb.Empty, error) {
	return nil, errgrpc.ToGRPC(fmt.Errorf("checkpoint: %w", errdefs.ErrNotImplemented))
}
