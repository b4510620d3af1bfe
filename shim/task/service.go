// Package task is the shim's task API (containerd.task.v3, and v2 through an
// adapter): a thin RPC surface over package process (process state) and
// package compute (compute systems), as containerd's runc shim is over its
// process and runc packages. One service holds every container of a pod.
package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	eventstypes "github.com/containerd/containerd/api/events"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/process"
	"github.com/winproc/winproc/shim/specconv"
)

// Service implements the task API over a compute backend.
type Service struct {
	backend   compute.Backend
	publisher events.Publisher
	shutdown  shutdown.Service
	// checkImage refuses, at Create, a container whose image the host
	// cannot run; nil skips the check.
	checkImage func(ctx context.Context, id string) error

	mu         sync.Mutex
	containers map[string]*container
}

var _ taskAPI.TTRPCTaskService = (*Service)(nil)

// New returns a task service.
func New(backend compute.Backend, publisher events.Publisher, sd shutdown.Service, checkImage func(ctx context.Context, id string) error) *Service {
	return &Service{
		backend:    backend,
		publisher:  publisher,
		shutdown:   sd,
		checkImage: checkImage,
		containers: map[string]*container{},
	}
}

// RegisterTTRPC serves both task API versions: containerd 2.x speaks v3,
// containerd 1.7 v2.
func (s *Service) RegisterTTRPC(server *ttrpc.Server) error {
	taskAPI.RegisterTTRPCTaskService(server, s)
	registerV2(server, s)
	return nil
}

func (s *Service) container(id string) (*container, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[id]
	if !ok {
		return nil, fmt.Errorf("task %s: %w", id, errdefs.ErrNotFound)
	}
	return c, nil
}

func (s *Service) process(id, execID string) (*container, *process.Process, error) {
	c, err := s.container(id)
	if err != nil {
		return nil, nil, err
	}
	p, err := c.process(execID)
	return c, p, err
}

func (s *Service) publish(ctx context.Context, topic string, event events.Event) {
	if err := s.publisher.Publish(ctx, topic, event); err != nil {
		log.G(ctx).WithError(err).WithField("topic", topic).Warn("publish event")
	}
}

// Create creates the container's compute system; its init process starts
// with Start.
func (s *Service) Create(ctx context.Context, r *taskAPI.CreateTaskRequest) (_ *taskAPI.CreateTaskResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	s.mu.Lock()
	_, exists := s.containers[r.ID]
	s.mu.Unlock()
	if exists {
		return nil, fmt.Errorf("task %s: %w", r.ID, errdefs.ErrAlreadyExists)
	}
	spec, err := readSpec(r.Bundle)
	if err != nil {
		return nil, err
	}
	if s.checkImage != nil {
		if err := s.checkImage(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	stdio := process.Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal}
	if err := s.create(ctx, r.ID, r.Bundle, spec, mount.FromProto(r.Rootfs), stdio, nil); err != nil {
		return nil, err
	}
	s.publish(ctx, runtime.TaskCreateEventTopic, &eventstypes.TaskCreate{
		ContainerID: r.ID,
		Bundle:      r.Bundle,
		Rootfs:      r.Rootfs,
		IO:          &eventstypes.TaskIO{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal},
		Checkpoint:  r.Checkpoint,
	})
	return &taskAPI.CreateTaskResponse{}, nil
}

// CreateFromSpec creates a task containerd did not ask for: the pod's pause
// container, whose spec and rootfs the shim's sandbox service made. release
// runs after the task's compute system is torn down.
func (s *Service) CreateFromSpec(ctx context.Context, id, bundle string, spec *specs.Spec, rootfs []mount.Mount, release func(context.Context) error) error {
	s.mu.Lock()
	_, exists := s.containers[id]
	s.mu.Unlock()
	if exists {
		return fmt.Errorf("task %s: %w", id, errdefs.ErrAlreadyExists)
	}
	return s.create(ctx, id, bundle, spec, rootfs, process.Stdio{}, release)
}

func (s *Service) create(ctx context.Context, id, bundle string, spec *specs.Spec, rootfs []mount.Mount, stdio process.Stdio, release func(context.Context) error) error {
	settings, procSettings, err := specconv.FromSpec(spec, rootfs, s.backend.HostCPUs())
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if settings.Resources.CPUCountCapped {
		log.G(ctx).WithField("task", id).Warnf("CPU count %d is more than the host's %d processors; using %d",
			settings.Resources.RequestedCPUCount, s.backend.HostCPUs(), settings.Resources.CPUCount)
	}
	c := &container{id: id, bundle: bundle, execs: map[string]*process.Process{}, release: release}
	c.init = process.New(id, procSettings, stdio, process.Hooks{
		OnExit: c.teardown,
		Notify: s.exitNotifier(id),
	})
	if err := c.init.Connect(ctx); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	sys, err := s.backend.Create(ctx, id, settings)
	if err != nil {
		c.init.Abandon()
		return fmt.Errorf("create compute system for task %s: %w", id, err)
	}
	c.system = sys
	s.mu.Lock()
	s.containers[id] = c
	s.mu.Unlock()
	return nil
}

// PodStats sums the statistics of every compute system this shim serves:
// the pod's usage.
func (s *Service) PodStats(ctx context.Context) (*compute.Stats, error) {
	s.mu.Lock()
	list := make([]*container, 0, len(s.containers))
	for _, c := range s.containers {
		list = append(list, c)
	}
	s.mu.Unlock()
	sum := &compute.Stats{Timestamp: time.Now()}
	for _, c := range list {
		if st := c.init.State(); st.Status != task.Status_RUNNING {
			continue
		}
		st, err := c.system.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("statistics of task %s: %w", c.id, err)
		}
		sum.CPU.TotalRuntimeNS += st.CPU.TotalRuntimeNS
		sum.CPU.RuntimeUserNS += st.CPU.RuntimeUserNS
		sum.CPU.RuntimeKernelNS += st.CPU.RuntimeKernelNS
		sum.Memory.CommitBytes += st.Memory.CommitBytes
		sum.Memory.CommitPeakBytes += st.Memory.CommitPeakBytes
		sum.Memory.PrivateWorkingSetBytes += st.Memory.PrivateWorkingSetBytes
		sum.Storage.ReadCount += st.Storage.ReadCount
		sum.Storage.ReadBytes += st.Storage.ReadBytes
		sum.Storage.WriteCount += st.Storage.WriteCount
		sum.Storage.WriteBytes += st.Storage.WriteBytes
	}
	return sum, nil
}

func readSpec(bundle string) (*specs.Spec, error) {
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bundle %s has no config.json: %w", bundle, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read the OCI spec of bundle %s: %w", bundle, err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("decode the OCI spec of bundle %s: %v: %w", bundle, err, errdefs.ErrInvalidArgument)
	}
	return &spec, nil
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

// exitNotifier publishes a process's exit: before its Wait returns, and for
// an init process after the compute system is torn down.
func (s *Service) exitNotifier(containerID string) func(context.Context, process.State) {
	return func(ctx context.Context, st process.State) {
		s.publish(ctx, runtime.TaskExitEventTopic, &eventstypes.TaskExit{
			ContainerID: containerID,
			ID:          st.ID,
			Pid:         st.Pid,
			ExitStatus:  st.ExitStatus,
			ExitedAt:    protobuf.ToTimestamp(st.ExitedAt),
		})
	}
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
	c, err := s.container(r.ID)
	if err != nil {
		return nil, err
	}
	if st := c.init.State(); st.Status != task.Status_RUNNING {
		return nil, fmt.Errorf("task %s is not running; cannot exec %s in it: %w", r.ID, r.ExecID, errdefs.ErrFailedPrecondition)
	}
	if r.Spec == nil {
		return nil, fmt.Errorf("exec %s has no process spec: %w", r.ExecID, errdefs.ErrInvalidArgument)
	}
	var spec specs.Process
	if err := json.Unmarshal(r.Spec.GetValue(), &spec); err != nil {
		return nil, fmt.Errorf("decode the process spec of exec %s: %v: %w", r.ExecID, err, errdefs.ErrInvalidArgument)
	}
	settings, err := specconv.ProcessFromSpec(&spec)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", r.ExecID, err)
	}
	p := process.New(r.ExecID, settings, process.Stdio{Stdin: r.Stdin, Stdout: r.Stdout, Stderr: r.Stderr, Terminal: r.Terminal}, process.Hooks{Notify: s.exitNotifier(r.ID)})
	if err := c.addExec(p); err != nil {
		return nil, err
	}
	s.publish(ctx, runtime.TaskExecAddedEventTopic, &eventstypes.TaskExecAdded{ContainerID: r.ID, ExecID: r.ExecID})
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

// Pids lists the processes in the task's compute system.
func (s *Service) Pids(ctx context.Context, r *taskAPI.PidsRequest) (_ *taskAPI.PidsResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	c, err := s.container(r.ID)
	if err != nil {
		return nil, err
	}
	list, err := c.system.ProcessList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list processes of task %s: %w", r.ID, err)
	}
	resp := &taskAPI.PidsResponse{}
	if !pidsWithDetails {
		for _, p := range list {
			resp.Processes = append(resp.Processes, &task.ProcessInfo{Pid: p.Pid})
		}
		return resp, nil
	}
	// As runhcs (hcsTask.Pids): each process's details, with the exec ID
	// of the task's own processes.
	execIDs := map[uint32]string{c.init.State().Pid: c.id}
	for _, e := range c.execList() {
		if st := e.State(); st.Pid != 0 {
			execIDs[st.Pid] = e.ID()
		}
	}
	for _, p := range list {
		info, err := typeurl.MarshalAnyToProto(ProcessDetails(p, execIDs[p.Pid]))
		if err != nil {
			return nil, fmt.Errorf("process details of task %s: %w", r.ID, err)
		}
		resp.Processes = append(resp.Processes, &task.ProcessInfo{Pid: p.Pid, Info: info})
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
	_, p, err := s.process(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	if err := p.ResizeConsole(ctx, r.Width, r.Height); err != nil {
		return nil, err
	}
	return &emptypb.Empty{}, nil
}

// CloseIO closes a process's standard input.
func (s *Service) CloseIO(ctx context.Context, r *taskAPI.CloseIORequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	_, p, err := s.process(r.ID, r.ExecID)
	if err != nil {
		return nil, err
	}
	if r.Stdin {
		if err := p.CloseStdin(ctx); err != nil {
			return nil, err
		}
	}
	return &emptypb.Empty{}, nil
}

// Update changes the task's CPU and memory limits.
func (s *Service) Update(ctx context.Context, r *taskAPI.UpdateTaskRequest) (_ *emptypb.Empty, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	c, err := s.container(r.ID)
	if err != nil {
		return nil, err
	}
	if r.Resources == nil {
		return nil, fmt.Errorf("update of task %s carries no resources: %w", r.ID, errdefs.ErrInvalidArgument)
	}
	// A Linux build of containerd's CRI sends Linux resources, whose JSON
	// would half fit a Windows struct.
	if url := r.Resources.GetTypeUrl(); !strings.HasSuffix(url, "/WindowsResources") {
		return nil, fmt.Errorf("update of task %s: the resources are %s; a Windows container takes Windows resources (runtime-spec WindowsResources, which containerd's Windows CRI sends): %w", r.ID, url, errdefs.ErrInvalidArgument)
	}
	var res specs.WindowsResources
	if err := typeurl.UnmarshalTo(r.Resources, &res); err != nil {
		if err := json.Unmarshal(r.Resources.GetValue(), &res); err != nil {
			return nil, fmt.Errorf("update of task %s: resources are not Windows resources: %v: %w", r.ID, err, errdefs.ErrInvalidArgument)
		}
	}
	resources, err := specconv.ResourcesFromSpec(&res, s.backend.HostCPUs())
	if err != nil {
		return nil, fmt.Errorf("update of task %s: %w", r.ID, err)
	}
	if err := c.system.Modify(ctx, resources); err != nil {
		return nil, fmt.Errorf("update of task %s: %w", r.ID, err)
	}
	return &emptypb.Empty{}, nil
}

// Stats reports the task's compute system in runhcs's statistics format,
// which containerd's CRI decodes on Windows.
func (s *Service) Stats(ctx context.Context, r *taskAPI.StatsRequest) (_ *taskAPI.StatsResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	c, err := s.container(r.ID)
	if err != nil {
		return nil, err
	}
	st, err := c.system.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("statistics of task %s: %w", r.ID, err)
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
	if c, err := s.container(r.ID); err == nil {
		resp.TaskPid = c.init.State().Pid
	}
	return resp, nil
}

// Shutdown stops the shim once it holds no task.
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
