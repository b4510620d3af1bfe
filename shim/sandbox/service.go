// Package sandbox is the shim's sandbox API (containerd.runtime.sandbox.v1):
// what containerd 2.x calls for a pod when the handler's sandboxer is
// "shim". The pod's pause container is a task of the shim's task service
// that containerd never asked for: its spec is made here from the CRI pod
// config and the pause image, its rootfs prepared by Prepare, and its
// lifetime is the sandbox's; a HostProcess pod has none, and its sandbox's
// task is the task service's stand-in (task.HostProcessPodSpec). The pod's
// containers then arrive through the task API on the same shim.
package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/pkg/protobuf"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/log"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/winproc/winproc/cri"
	"github.com/winproc/winproc/shim/pauseimage"
	"github.com/winproc/winproc/shim/process"
	taskservice "github.com/winproc/winproc/shim/task"
	"github.com/winproc/winproc/winbuild"
)

// shutdownGrace is how long the shim outlives its ShutdownSandbox reply.
const shutdownGrace = 500 * time.Millisecond

// defaultStopTimeout is how long StopSandbox waits for the pause process
// after CTRL_SHUTDOWN when containerd gives no timeout (CRI's
// StopPodSandbox gives none), before it terminates it. containerd's own
// pod sandbox controller kills the pause task at once; a pause process
// that does not answer the event in 5 s (a frozen silo) would otherwise
// hold StopPodSandbox past the kubelet's deadline.
const defaultStopTimeout = 5 * time.Second

// Prepare makes the rootfs of sandbox id from image; release frees it.
type Prepare func(ctx context.Context, image, id string) (rootfs *pauseimage.Rootfs, release func(context.Context) error, err error)

// Service implements the sandbox API over the shim's task service.
type Service struct {
	tasks      *taskservice.Service
	prepare    Prepare
	pauseImage string
	host       winbuild.Version

	mu  sync.Mutex
	pod *pod
}

type pod struct {
	id        string
	settings  *cri.Pod
	image     string
	createdAt time.Time
	spec      *specs.Spec
}

// specTypeURL is the type URL containerd registers for an OCI spec, which
// it decodes from JSON.
const specTypeURL = "types.containerd.io/opencontainers/runtime-spec/1/Spec"

var _ sandboxAPI.TTRPCSandboxService = (*Service)(nil)

// New returns the sandbox service of a shim.
func New(tasks *taskservice.Service, prepare Prepare, pauseImage string, host winbuild.Version) *Service {
	return &Service{tasks: tasks, prepare: prepare, pauseImage: pauseImage, host: host}
}

// RegisterTTRPC serves the sandbox API.
func (s *Service) RegisterTTRPC(server *ttrpc.Server) error {
	sandboxAPI.RegisterTTRPCSandboxService(server, s)
	return nil
}

func (s *Service) get(id string) (*pod, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pod == nil || s.pod.id != id {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return s.pod, nil
}

// CreateSandbox decodes the pod's CRI config, prepares the pause image and
// creates the pause container's compute system in the pod's network
// namespace; a HostProcess pod gets createHostProcessPod's sandbox instead.
// Nothing is left behind when it fails.
func (s *Service) CreateSandbox(ctx context.Context, r *sandboxAPI.CreateSandboxRequest) (_ *sandboxAPI.CreateSandboxResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	settings, err := cri.FromCreateSandbox(r.GetOptions(), r.GetNetnsPath())
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", r.SandboxID, err)
	}
	s.mu.Lock()
	if s.pod != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: this shim already serves sandbox %s: %w", r.SandboxID, s.pod.id, errdefs.ErrAlreadyExists)
	}
	s.pod = &pod{id: r.SandboxID, settings: settings, image: s.pauseImage, createdAt: time.Now()}
	s.mu.Unlock()
	defer func() {
		if retErr != nil {
			s.mu.Lock()
			s.pod = nil
			s.mu.Unlock()
		}
	}()
	if settings.HostProcess {
		if err := s.createHostProcessPod(ctx, r); err != nil {
			return nil, err
		}
		return &sandboxAPI.CreateSandboxResponse{}, nil
	}

	rootfs, release, err := s.prepare(ctx, s.pauseImage, r.SandboxID)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", r.SandboxID, err)
	}
	spec := pauseSpec(r.SandboxID, settings, rootfs)
	if err := s.tasks.CreateFromSpec(ctx, r.SandboxID, r.BundlePath, spec, rootfs.Mounts, release); err != nil {
		if rerr := release(ctx); rerr != nil {
			log.G(ctx).WithError(rerr).WithField("sandbox", r.SandboxID).Warn("release pause rootfs after failed create")
		}
		return nil, fmt.Errorf("sandbox %s: %w", r.SandboxID, err)
	}
	s.mu.Lock()
	s.pod.spec = spec
	s.mu.Unlock()
	return &sandboxAPI.CreateSandboxResponse{}, nil
}

// createHostProcessPod makes a HostProcess pod's sandbox, which has no
// pause container, no pause image and no rootfs: the task service's
// stand-in for it (shim/task hostprocesspod.go), as for the pause
// container containerd asks for in podsandbox mode.
func (s *Service) createHostProcessPod(ctx context.Context, r *sandboxAPI.CreateSandboxRequest) error {
	spec := taskservice.HostProcessPodSpec(r.SandboxID)
	if err := s.tasks.CreateFromSpec(ctx, r.SandboxID, r.BundlePath, spec, nil, nil); err != nil {
		return fmt.Errorf("sandbox %s: %w", r.SandboxID, err)
	}
	s.mu.Lock()
	s.pod.image, s.pod.spec = "", spec
	s.mu.Unlock()
	return nil
}

// pauseSpec is the OCI spec of the pod's infrastructure container id. It
// carries the annotations containerd's CRI puts on the pause container in
// podsandbox mode. winproc reads none of them; they are for whoever reads
// the spec StartSandbox returns (containerd hands it to NRI plugins).
func pauseSpec(id string, p *cri.Pod, rootfs *pauseimage.Rootfs) *specs.Spec {
	cwd := rootfs.WorkingDir
	if cwd == "" {
		cwd = `C:\`
	}
	spec := &specs.Spec{
		Version:  specs.Version,
		Hostname: p.Hostname,
		Root:     &specs.Root{},
		Annotations: map[string]string{
			annotations.KubernetesContainerType: "sandbox",
			annotations.KubernetesSandboxID:     id,
		},
		Process: &specs.Process{
			Args: rootfs.Args,
			Env:  rootfs.Env,
			Cwd:  cwd,
			User: specs.User{Username: p.RunAsUserName},
		},
		Windows: &specs.Windows{
			Network: &specs.WindowsNetwork{
				NetworkNamespace: p.Network.Namespace,
				DNSSearchList:    p.DNS.Searches,
			},
		},
	}
	if rootfs.ArgsEscaped && len(rootfs.Args) > 0 {
		// The image's command line is already one Windows command line.
		spec.Process.CommandLine, spec.Process.Args = strings.Join(rootfs.Args, " "), nil
	}
	if spec.Process.User.Username == "" {
		spec.Process.User.Username = rootfs.User
	}
	if p.GMSA != nil {
		spec.Windows.CredentialSpec = p.GMSA.CredentialSpec
	}
	return spec
}

// StartSandbox starts the pause process.
func (s *Service) StartSandbox(ctx context.Context, r *sandboxAPI.StartSandboxRequest) (_ *sandboxAPI.StartSandboxResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	p, err := s.get(r.SandboxID)
	if err != nil {
		return nil, err
	}
	pid, err := s.tasks.StartProcess(ctx, r.SandboxID, "")
	if err != nil {
		return nil, err
	}
	// containerd hands the sandbox's spec to NRI plugins.
	spec, err := json.Marshal(p.spec)
	if err != nil {
		return nil, err
	}
	return &sandboxAPI.StartSandboxResponse{
		Pid:       pid,
		CreatedAt: protobuf.ToTimestamp(p.createdAt),
		Spec:      &anypb.Any{TypeUrl: specTypeURL, Value: spec},
	}, nil
}

// Platform is windows/amd64 at the host's Windows build.
func (s *Service) Platform(ctx context.Context, r *sandboxAPI.PlatformRequest) (*sandboxAPI.PlatformResponse, error) {
	if _, err := s.get(r.SandboxID); err != nil {
		return nil, errgrpc.ToGRPC(err)
	}
	return &sandboxAPI.PlatformResponse{Platform: &types.Platform{OS: "windows", Architecture: "amd64", OSVersion: s.host.String()}}, nil
}

// StopSandbox stops the pause process, which tears the pod's compute
// system down and frees its rootfs: CTRL_SHUTDOWN first, terminate after
// the timeout. Stopping a stopped sandbox is fine.
func (s *Service) StopSandbox(ctx context.Context, r *sandboxAPI.StopSandboxRequest) (_ *sandboxAPI.StopSandboxResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if _, err := s.get(r.SandboxID); err != nil {
		return nil, err
	}
	timeout := defaultStopTimeout
	if r.TimeoutSecs > 0 {
		timeout = time.Duration(r.TimeoutSecs) * time.Second
	}
	if err := s.stop(ctx, r.SandboxID, timeout); err != nil {
		return nil, err
	}
	return &sandboxAPI.StopSandboxResponse{}, nil
}

func (s *Service) stop(ctx context.Context, id string, timeout time.Duration) error {
	// CTRL_SHUTDOWN again every second: an event sent while the pause
	// process is still starting, before its handler is in place, is lost
	// (Wine drops it), and a second one costs a stopping process nothing.
	deadline := time.Now().Add(timeout)
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if err := s.kill(ctx, id, syscall.SIGTERM); err != nil {
			if attempt == 0 {
				return err
			}
			log.G(ctx).WithError(err).WithField("sandbox", id).Debug("repeat CTRL_SHUTDOWN")
		}
		waitCtx, cancel := context.WithTimeout(ctx, min(time.Second, time.Until(deadline)))
		_, _, err := s.tasks.WaitProcess(waitCtx, id, "")
		cancel()
		if err == nil {
			return nil
		}
	}
	log.G(ctx).WithField("sandbox", id).Warnf("pause process did not stop within %v; terminating", timeout)
	if err := s.kill(ctx, id, syscall.SIGKILL); err != nil {
		return err
	}
	_, _, err := s.tasks.WaitProcess(ctx, id, "")
	return err
}

func (s *Service) kill(ctx context.Context, id string, sig syscall.Signal) error {
	err := s.tasks.KillProcess(ctx, id, "", uint32(sig), true)
	if errdefs.IsNotFound(err) {
		// Already exited (or deleted): stopped.
		return nil
	}
	return err
}

// WaitSandbox returns once the sandbox has stopped and is torn down.
func (s *Service) WaitSandbox(ctx context.Context, r *sandboxAPI.WaitSandboxRequest) (_ *sandboxAPI.WaitSandboxResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if _, err := s.get(r.SandboxID); err != nil {
		return nil, err
	}
	exit, exitedAt, err := s.tasks.WaitProcess(ctx, r.SandboxID, "")
	if err != nil {
		return nil, err
	}
	return &sandboxAPI.WaitSandboxResponse{ExitStatus: exit, ExitedAt: protobuf.ToTimestamp(exitedAt)}, nil
}

// SandboxStatus reports the sandbox; verbose adds the pod's settings
// (what crictl inspectp shows).
func (s *Service) SandboxStatus(ctx context.Context, r *sandboxAPI.SandboxStatusRequest) (_ *sandboxAPI.SandboxStatusResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	p, err := s.get(r.SandboxID)
	if err != nil {
		return nil, err
	}
	st, err := s.pauseState(p)
	if err != nil {
		return nil, err
	}
	state := "SANDBOX_NOTREADY"
	if st.Status == task.Status_RUNNING {
		state = "SANDBOX_READY"
	}
	resp := &sandboxAPI.SandboxStatusResponse{
		SandboxID: r.SandboxID,
		Pid:       st.Pid,
		State:     state,
		CreatedAt: protobuf.ToTimestamp(p.createdAt),
	}
	if st.Status == task.Status_STOPPED {
		resp.ExitedAt = protobuf.ToTimestamp(st.ExitedAt)
	}
	if r.Verbose {
		info, err := cri.VerboseInfo(p.settings, cri.RuntimeStatus{
			Pid:           st.Pid,
			ProcessStatus: st.Status.String(),
			Image:         p.image,
		})
		if err != nil {
			return nil, err
		}
		resp.Info = info
	}
	return resp, nil
}

// pauseState is the state of the pod's pause process (a HostProcess pod's
// stand-in's: pid 0, running from its start to its stop).
func (s *Service) pauseState(p *pod) (process.State, error) {
	_, st, err := s.tasks.ProcessState(p.id, "")
	return st, err
}

// PingSandbox answers while the shim serves the sandbox.
func (s *Service) PingSandbox(ctx context.Context, r *sandboxAPI.PingRequest) (*sandboxAPI.PingResponse, error) {
	if _, err := s.get(r.SandboxID); err != nil {
		return nil, errgrpc.ToGRPC(err)
	}
	return &sandboxAPI.PingResponse{}, nil
}

// ShutdownSandbox stops the sandbox if needed, forgets it, and lets the
// shim exit once it serves no task. containerd also calls it to clean up
// after a CreateSandbox that failed, when there is no sandbox: the shim
// must still go.
func (s *Service) ShutdownSandbox(ctx context.Context, r *sandboxAPI.ShutdownSandboxRequest) (_ *sandboxAPI.ShutdownSandboxResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if _, err := s.get(r.SandboxID); err == nil {
		if err := s.stop(ctx, r.SandboxID, defaultStopTimeout); err != nil {
			return nil, err
		}
		if _, err := s.tasks.DeleteProcess(ctx, r.SandboxID, ""); err != nil && !errdefs.IsNotFound(err) {
			return nil, err
		}
		s.mu.Lock()
		s.pod = nil
		s.mu.Unlock()
	}
	// pkg/shim ends the process as soon as shutdown starts, without
	// finishing replies in flight, and containerd fails the pod's removal
	// on a lost reply. So the shim goes once this reply is on its way.
	time.AfterFunc(shutdownGrace, s.tasks.ShutdownIfIdle)
	return &sandboxAPI.ShutdownSandboxResponse{}, nil
}

// SandboxMetrics is the pod's usage: every compute system of the shim.
func (s *Service) SandboxMetrics(ctx context.Context, r *sandboxAPI.SandboxMetricsRequest) (_ *sandboxAPI.SandboxMetricsResponse, retErr error) {
	defer func() { retErr = errgrpc.ToGRPC(retErr) }()
	if _, err := s.get(r.SandboxID); err != nil {
		return nil, err
	}
	st, err := s.tasks.PodStats(ctx)
	if err != nil {
		return nil, err
	}
	data, err := typeurl.MarshalAnyToProto(taskservice.Statistics(st))
	if err != nil {
		return nil, err
	}
	return &sandboxAPI.SandboxMetricsResponse{Metrics: &types.Metric{Timestamp: protobuf.ToTimestamp(st.Timestamp), ID: r.SandboxID, Data: data}}, nil
}

// UpdateSandbox changes nothing a running Windows pod can take: containerd
// tolerates its absence.
func (s *Service) UpdateSandbox(ctx context.Context, r *sandboxAPI.UpdateSandboxRequest) (*sandboxAPI.UpdateSandboxResponse, error) {
	return nil, errgrpc.ToGRPC(fmt.Errorf("update of sandbox %s: %w", r.SandboxID, errdefs.ErrNotImplemented))
}
