package task

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	eventstypes "github.com/containerd/containerd/api/events"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/containerd/v2/pkg/shutdown"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/process"
	"github.com/winproc/winproc/shim/specconv"
)

// The task service in native Go: the registry of the pod's tasks and what
// can be done to them. The RPC methods (service.go) only unwrap requests,
// call these and map errors to gRPC; the sandbox service calls them
// directly. Errors carry errdefs classes.

// Service holds every task of a pod over a compute backend.
type Service struct {
	backend   compute.Backend
	publisher events.Publisher
	shutdown  shutdown.Service
	// checkImage refuses, at CreateTask, a container whose image the host
	// cannot run; nil skips the check.
	checkImage func(ctx context.Context, id string) error
	// checkPod refuses, at the pause container's CreateTask in podsandbox
	// mode, a pod whose config shim mode would refuse; nil skips it.
	checkPod func(ctx context.Context, id string) error

	mu         sync.Mutex
	containers map[string]*container
	// podKind is the pod's HostProcess flag once known, from the spec of
	// its sandbox's task (checkPodKind): containerd's pause container in
	// podsandbox mode, the sandbox service's in shim mode. Every container
	// of the pod must be of its kind.
	podKind *bool
	// draining is set while an idle shim waits for its backend's
	// background work before it stops (ShutdownIfIdle).
	draining bool
}

// SetPodCheck sets the check of a pod's config that the pause container's
// CreateTask runs in podsandbox mode, where containerd, not the sandbox
// service, is given the config: so that a pod gets the same answer in
// both modes.
func (s *Service) SetPodCheck(check func(ctx context.Context, id string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkPod = check
}

// checkPodKind refuses a container whose HostProcess flag is not its
// pod's, and learns the pod's kind from its sandbox's task, the first
// marked with io.kubernetes.cri.container-type sandbox: containerd's CRI
// marks the pause container so, and the sandbox service its own in shim
// mode.
func (s *Service) checkPodKind(spec *specs.Spec) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.Annotations[annotations.KubernetesContainerType] == criSandbox && s.podKind == nil {
		hp := specconv.IsHostProcess(spec)
		s.podKind = &hp
		return nil
	}
	if s.podKind == nil {
		return nil
	}
	return specconv.CheckPodKind(spec, *s.podKind)
}

// criSandbox is the container type containerd's CRI gives a pod's pause
// container (annotations.KubernetesContainerType).
const criSandbox = "sandbox"

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

// exists refuses a task ID already in use.
func (s *Service) exists(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.containers[id]; ok {
		return fmt.Errorf("task %s: %w", id, errdefs.ErrAlreadyExists)
	}
	return nil
}

// CreateTask creates the compute system of task id from the OCI spec in
// its bundle, once its image passes the image check; its init process
// starts with StartProcess.
func (s *Service) CreateTask(ctx context.Context, id, bundle string, rootfs []mount.Mount, stdio process.Stdio) error {
	if err := s.exists(id); err != nil {
		return err
	}
	spec, err := readSpec(bundle)
	if err != nil {
		return err
	}
	if err := s.checkPodKind(spec); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	checksStart := time.Now()
	s.mu.Lock()
	checkPod := s.checkPod
	s.mu.Unlock()
	if checkPod != nil && spec.Annotations[annotations.KubernetesContainerType] == criSandbox {
		if err := checkPod(ctx, id); err != nil {
			return fmt.Errorf("task %s: %w", id, err)
		}
	}
	// A HostProcess container runs on the host, not on its image's
	// Windows: its image may be built for any build (KEP-1981).
	if s.checkImage != nil && !specconv.IsHostProcess(spec) {
		if err := s.checkImage(ctx, id); err != nil {
			return err
		}
	}
	// Where a create's time goes, for a debug-level node log.
	checks, createStart := time.Since(checksStart), time.Now()
	if err := s.create(ctx, id, bundle, spec, rootfs, stdio, nil); err != nil {
		return err
	}
	log.G(ctx).WithFields(log.Fields{"task": id, "checks": checks, "create": time.Since(createStart)}).Debug("task created")
	return nil
}

// CreateFromSpec creates a task containerd did not ask for: the pod's pause
// container, whose spec and rootfs the shim's sandbox service made. release
// runs after the task's compute system is torn down.
func (s *Service) CreateFromSpec(ctx context.Context, id, bundle string, spec *specs.Spec, rootfs []mount.Mount, release func(context.Context) error) error {
	if err := s.exists(id); err != nil {
		return err
	}
	if err := s.checkPodKind(spec); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	return s.create(ctx, id, bundle, spec, rootfs, process.Stdio{}, release)
}

func (s *Service) create(ctx context.Context, id, bundle string, spec *specs.Spec, rootfs []mount.Mount, stdio process.Stdio, release func(context.Context) error) error {
	hostProcessPod := isHostProcessPod(spec)
	settings, procSettings := &compute.Settings{}, &compute.ProcessSettings{}
	var err error
	if hostProcessPod {
		// Nothing of the spec runs (hostprocesspod.go).
		settings.HostProcess = &compute.HostProcess{}
	} else if settings, procSettings, err = specconv.FromSpec(spec, rootfs, s.backend.HostCPUs()); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	if settings.Resources.CPUCountCapped {
		log.G(ctx).WithField("task", id).Warnf("CPU count %d is more than the host's %d processors; using %d",
			settings.Resources.RequestedCPUCount, s.backend.HostCPUs(), settings.Resources.CPUCount)
	}
	c := &container{id: id, bundle: bundle, execs: map[string]*process.Process{}, release: release, hostProcess: settings.HostProcess != nil, limits: settings.Resources}
	c.init = process.New(id, procSettings, stdio, process.Hooks{
		OnExit: c.teardown,
		Notify: s.exitNotifier(id),
	})
	if err := c.init.Connect(ctx); err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	var sys compute.System
	if hostProcessPod {
		sys = newHostProcessPod(id)
	} else {
		sys, err = s.backend.Create(ctx, id, settings)
	}
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

// ExecProcess adds process execID to running task id; it starts with
// StartProcess.
func (s *Service) ExecProcess(ctx context.Context, id, execID string, spec *specs.Process, stdio process.Stdio) error {
	c, err := s.container(id)
	if err != nil {
		return err
	}
	if st := c.init.State(); st.Status != task.Status_RUNNING {
		return fmt.Errorf("task %s is not running; cannot exec %s in it: %w", id, execID, errdefs.ErrFailedPrecondition)
	}
	if spec == nil {
		return fmt.Errorf("exec %s has no process spec: %w", execID, errdefs.ErrInvalidArgument)
	}
	settings, err := specconv.ProcessFromSpec(spec)
	if err != nil {
		return fmt.Errorf("exec %s: %w", execID, err)
	}
	if c.hostProcess {
		settings.WorkingDirectory = specconv.HostProcessWorkingDir(settings.WorkingDirectory)
	}
	p := process.New(execID, settings, stdio, process.Hooks{Notify: s.exitNotifier(id)})
	if err := c.addExec(p); err != nil {
		return err
	}
	s.publish(ctx, runtime.TaskExecAddedEventTopic, &eventstypes.TaskExecAdded{ContainerID: id, ExecID: execID})
	return nil
}

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
	if execID == "" && signal == uint32(syscall.SIGKILL) {
		c.killed.Store(true)
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

// drainTimeout bounds how long an idle shim stays for the work its backend
// carries on in the background (a teardown the emulation retries for 10
// minutes at most).
const drainTimeout = 10 * time.Minute

// ShutdownIfIdle stops the shim unless it still holds a task (a pod's
// sandbox is one, a HostProcess pod's too). The backend's background work
// (compute.Drainer) is the shim's: the shim stops once it has ended, within
// drainTimeout, and still idle.
func (s *Service) ShutdownIfIdle() {
	s.mu.Lock()
	idle := len(s.containers) == 0
	start := idle && !s.draining
	s.draining = s.draining || idle
	s.mu.Unlock()
	if !start {
		return
	}
	d, ok := s.backend.(compute.Drainer)
	if !ok {
		s.shutdown.Shutdown()
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
		defer cancel()
		if err := d.Drain(ctx); err != nil {
			log.G(ctx).WithError(err).Warn("stopping with background teardowns pending: the shim's delete or winproc doctor -fix removes what they leave")
		}
		s.mu.Lock()
		idle := len(s.containers) == 0
		s.draining = false
		s.mu.Unlock()
		if idle {
			s.shutdown.Shutdown()
		}
	}()
}

// TaskProcess is a process of a task's compute system.
type TaskProcess struct {
	compute.ProcessInfo
	// ExecID names the task's own process it is, if any: the task's ID
	// for its init process.
	ExecID string
}

// ListProcesses lists the processes in the compute system of task id.
func (s *Service) ListProcesses(ctx context.Context, id string) ([]TaskProcess, error) {
	c, err := s.container(id)
	if err != nil {
		return nil, err
	}
	list, err := c.system.ProcessList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list processes of task %s: %w", id, err)
	}
	execIDs := map[uint32]string{c.init.State().Pid: c.id}
	for _, e := range c.execList() {
		if st := e.State(); st.Pid != 0 {
			execIDs[st.Pid] = e.ID()
		}
	}
	procs := make([]TaskProcess, 0, len(list))
	for _, p := range list {
		procs = append(procs, TaskProcess{ProcessInfo: p, ExecID: execIDs[p.Pid]})
	}
	return procs, nil
}

// ResizeProcess resizes the console of a process.
func (s *Service) ResizeProcess(ctx context.Context, id, execID string, width, height uint32) error {
	_, p, err := s.process(id, execID)
	if err != nil {
		return err
	}
	return p.ResizeConsole(ctx, width, height)
}

// CloseProcessIO closes, if stdin is set, the standard input of a process.
func (s *Service) CloseProcessIO(ctx context.Context, id, execID string, stdin bool) error {
	_, p, err := s.process(id, execID)
	if err != nil {
		return err
	}
	if !stdin {
		return nil
	}
	return p.CloseStdin(ctx)
}

// TaskStats reports the compute system of task id.
func (s *Service) TaskStats(ctx context.Context, id string) (*compute.Stats, error) {
	c, err := s.container(id)
	if err != nil {
		return nil, err
	}
	st, err := c.system.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("statistics of task %s: %w", id, err)
	}
	return st, nil
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
