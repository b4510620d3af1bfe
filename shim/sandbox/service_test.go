package sandbox

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/v2/core/events"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/compute/computetest"
	"github.com/winproc/winproc/shim/pauseimage"
	"github.com/winproc/winproc/shim/task"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
)

type discard struct{}

func (discard) Publish(context.Context, string, events.Event) error { return nil }

type noShutdown struct{}

func (noShutdown) Shutdown()                                    {}
func (noShutdown) RegisterCallback(func(context.Context) error) {}
func (noShutdown) Done() <-chan struct{}                        { return nil }
func (noShutdown) Err() error                                   { return nil }

// images is the pause image preparation at the seam: it hands out a
// windows-layer mount and counts releases.
type images struct {
	mu       sync.Mutex
	err      error
	prepared int
	released int
}

func (im *images) prepare(_ context.Context, image, id string) (*pauseimage.Rootfs, func(context.Context) error, error) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if im.err != nil {
		return nil, nil, im.err
	}
	im.prepared++
	rootfs := &pauseimage.Rootfs{
		Mounts: []mount.Mount{layermount.Layer{Path: "/s/scratch-" + id, Parents: []string{"/s/pause", "/s/base"}}.Mount()},
		Image:  image,
		Args:   []string{`C:\pause.exe`},
	}
	return rootfs, func(context.Context) error {
		im.mu.Lock()
		defer im.mu.Unlock()
		im.released++
		return nil
	}, nil
}

var host = winbuild.Version{Major: 10, Build: 20348, Revision: 7}

func newService(t *testing.T) (*Service, *computetest.Backend, *images) {
	t.Helper()
	backend := computetest.NewBackend()
	im := &images{}
	tasks := task.New(backend, discard{}, noShutdown{}, nil)
	return New(tasks, im.prepare, "example.com/pause:test", host), backend, im
}

func podConfig(t *testing.T, cfg *runtime.PodSandboxConfig) *anypb.Any {
	t.Helper()
	a, err := typeurl.MarshalAnyToProto(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func validConfig() *runtime.PodSandboxConfig {
	return &runtime.PodSandboxConfig{
		Metadata:     &runtime.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "u1"},
		Hostname:     "web-0",
		DnsConfig:    &runtime.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"default.svc.cluster.local"}},
		LogDirectory: `C:\var\log\pods\web`,
		Windows: &runtime.WindowsPodSandboxConfig{SecurityContext: &runtime.WindowsSandboxSecurityContext{
			RunAsUsername: "ContainerUser",
		}},
	}
}

func TestSandboxLifecycle(t *testing.T) {
	s, backend, im := newService(t)
	ctx := context.Background()
	if _, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "pod1", BundlePath: t.TempDir(), Options: podConfig(t, validConfig()), NetnsPath: "5f1d6a3c-8e2b-4c7d-9a10-2b3c4d5e6f70"}); err != nil {
		t.Fatal(err)
	}
	sys := backend.System("pod1")
	if sys == nil {
		t.Fatal("no compute system for the pause container")
	}
	if st := sys.Settings; st.HostName != "web-0" || st.Network.Namespace != "5f1d6a3c-8e2b-4c7d-9a10-2b3c4d5e6f70" || len(st.Network.DNSSearchList) != 1 ||
		st.Layers.Scratch != "/s/scratch-pod1" || len(st.Layers.Parents) != 2 {
		t.Errorf("pause system settings %+v", st)
	}

	start, err := s.StartSandbox(ctx, &sandboxAPI.StartSandboxRequest{SandboxID: "pod1"})
	if err != nil {
		t.Fatal(err)
	}
	pause := sys.Proc(0)
	if start.Pid != uint32(pause.Pid()) || start.CreatedAt == nil || start.Spec.GetTypeUrl() != specTypeURL || !strings.Contains(string(start.Spec.GetValue()), `pause.exe`) {
		t.Errorf("start %+v, pause pid %d", start, pause.Pid())
	}
	if pause.Settings().CommandLine != `C:\pause.exe` || pause.Settings().User != "ContainerUser" {
		t.Errorf("pause process %+v", pause.Settings())
	}

	status, err := s.SandboxStatus(ctx, &sandboxAPI.SandboxStatusRequest{SandboxID: "pod1", Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	if status.State != "SANDBOX_READY" || status.Pid != start.Pid || status.Info["winproc"] == "" || status.Info["info"] == "" {
		t.Errorf("status %+v", status)
	}
	platform, err := s.Platform(ctx, &sandboxAPI.PlatformRequest{SandboxID: "pod1"})
	if err != nil || platform.Platform.OS != "windows" || platform.Platform.Architecture != "amd64" || platform.Platform.OSVersion != "10.0.20348.7" {
		t.Errorf("platform %v, %v", platform, err)
	}
	if _, err := s.PingSandbox(ctx, &sandboxAPI.PingRequest{SandboxID: "pod1"}); err != nil {
		t.Error(err)
	}
	metrics, err := s.SandboxMetrics(ctx, &sandboxAPI.SandboxMetricsRequest{SandboxID: "pod1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(metrics.Metrics.Data)
	if w, ok := v.(*wstats.Statistics); err != nil || !ok || w.GetWindows().GetProcessor().GetTotalRuntimeNS() == 0 {
		t.Errorf("metrics %v, %v", v, err)
	}

	// Stop: CTRL_SHUTDOWN to pause, teardown, rootfs released; twice is fine.
	for i := 0; i < 2; i++ {
		if _, err := s.StopSandbox(ctx, &sandboxAPI.StopSandboxRequest{SandboxID: "pod1", TimeoutSecs: 5}); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
	if sig := pause.Signals; len(sig) == 0 || sig[0] != compute.CtrlShutdown {
		t.Errorf("pause got %v, want CTRL_SHUTDOWN", sig)
	}
	if !sys.Closed || im.released != 1 {
		t.Errorf("after stop: system closed %v, rootfs released %d times", sys.Closed, im.released)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.WaitSandbox(waitCtx, &sandboxAPI.WaitSandboxRequest{SandboxID: "pod1"}); err != nil {
		t.Fatal(err)
	}
	status, _ = s.SandboxStatus(ctx, &sandboxAPI.SandboxStatusRequest{SandboxID: "pod1"})
	if status.State != "SANDBOX_NOTREADY" || status.ExitedAt == nil {
		t.Errorf("status after stop %+v", status)
	}

	if _, err := s.ShutdownSandbox(ctx, &sandboxAPI.ShutdownSandboxRequest{SandboxID: "pod1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SandboxStatus(ctx, &sandboxAPI.SandboxStatusRequest{SandboxID: "pod1"}); !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		t.Errorf("status after shutdown: %v, want NotFound", err)
	}
}

func TestCreateSandboxFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("bad options", func(t *testing.T) {
		s, backend, im := newService(t)
		for _, opts := range []*anypb.Any{nil, {TypeUrl: "runtime.v1.PodSandboxConfig", Value: []byte{0xff, 0x01}}} {
			_, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "p", Options: opts})
			if !errdefs.IsInvalidArgument(errgrpc.ToNative(err)) {
				t.Errorf("options %v: %v, want InvalidArgument", opts, err)
			}
		}
		if backend.System("p") != nil || im.prepared != 0 {
			t.Error("a refused sandbox left state behind")
		}
	})
	t.Run("Linux-only field", func(t *testing.T) {
		s, _, _ := newService(t)
		cfg := validConfig()
		cfg.Linux = &runtime.LinuxPodSandboxConfig{Sysctls: map[string]string{"net.core.somaxconn": "1024"}}
		_, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "p", Options: podConfig(t, cfg)})
		if !errdefs.IsInvalidArgument(errgrpc.ToNative(err)) {
			t.Errorf("sysctls: %v, want InvalidArgument", err)
		}
	})
	t.Run("pause image missing, then present", func(t *testing.T) {
		s, backend, im := newService(t)
		im.err = fmt.Errorf("pause image %q is not in containerd's image store: %w", "example.com/pause:test", errdefs.ErrNotFound)
		_, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "p", Options: podConfig(t, validConfig())})
		if !errdefs.IsNotFound(errgrpc.ToNative(err)) {
			t.Fatalf("missing pause image: %v, want NotFound", err)
		}
		if backend.System("p") != nil {
			t.Error("system created without a pause rootfs")
		}
		im.err = nil
		if _, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "p", Options: podConfig(t, validConfig())}); err != nil {
			t.Errorf("create after the failure: %v", err)
		}
		_, err = s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "q", Options: podConfig(t, validConfig())})
		if !errdefs.IsAlreadyExists(errgrpc.ToNative(err)) {
			t.Errorf("second sandbox in one shim: %v, want AlreadyExists", err)
		}
	})
	t.Run("unknown sandbox", func(t *testing.T) {
		s, _, _ := newService(t)
		_, err := s.StopSandbox(ctx, &sandboxAPI.StopSandboxRequest{SandboxID: "nope"})
		if !errdefs.IsNotFound(errgrpc.ToNative(err)) {
			t.Errorf("stop of unknown sandbox: %v, want NotFound", err)
		}
	})
}
