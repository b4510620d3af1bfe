package sandbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/winproc/winproc/shim/process"
	"github.com/winproc/winproc/snapshotter/layermount"
)

func hostProcessConfig() *runtime.PodSandboxConfig {
	cfg := validConfig()
	cfg.Hostname = ""
	cfg.Linux = &runtime.LinuxPodSandboxConfig{SecurityContext: &runtime.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtime.NamespaceOption{Network: runtime.NamespaceMode_NODE},
	}}
	cfg.Windows.SecurityContext = &runtime.WindowsSandboxSecurityContext{HostProcess: true, RunAsUsername: `NT AUTHORITY\SYSTEM`}
	return cfg
}

// A HostProcess pod has no pause container: no pause image, no compute
// system, no process. Its sandbox is ready from start to stop.
func TestHostProcessSandbox(t *testing.T) {
	s, backend, im := newService(t)
	ctx := context.Background()
	if _, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "hp", BundlePath: t.TempDir(), Options: podConfig(t, hostProcessConfig())}); err != nil {
		t.Fatal(err)
	}
	if backend.System("hp") != nil || im.prepared != 0 {
		t.Fatalf("a HostProcess pod got a pause container (system %v, %d pause rootfs)", backend.System("hp"), im.prepared)
	}
	status := func() *sandboxAPI.SandboxStatusResponse {
		t.Helper()
		st, err := s.SandboxStatus(ctx, &sandboxAPI.SandboxStatusRequest{SandboxID: "hp", Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := status(); st.State != "SANDBOX_NOTREADY" {
		t.Errorf("before start: %s", st.State)
	}
	start, err := s.StartSandbox(ctx, &sandboxAPI.StartSandboxRequest{SandboxID: "hp"})
	if err != nil {
		t.Fatal(err)
	}
	if start.Pid != 0 || start.Spec == nil {
		t.Errorf("StartSandbox = %+v", start)
	}
	if st := status(); st.State != "SANDBOX_READY" || st.Pid != 0 || st.Info["winproc"] == "" {
		t.Errorf("started: %+v", st)
	}
	waited := make(chan *sandboxAPI.WaitSandboxResponse, 1)
	go func() {
		w, err := s.WaitSandbox(ctx, &sandboxAPI.WaitSandboxRequest{SandboxID: "hp"})
		if err != nil {
			t.Error(err)
		}
		waited <- w
	}()
	select {
	case <-waited:
		t.Fatal("WaitSandbox returned before the stop")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := s.StopSandbox(ctx, &sandboxAPI.StopSandboxRequest{SandboxID: "hp"}); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waited:
		if w == nil || w.ExitStatus != 0 || w.ExitedAt == nil {
			t.Errorf("WaitSandbox = %+v", w)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("WaitSandbox did not return after the stop")
	}
	if st := status(); st.State != "SANDBOX_NOTREADY" || st.ExitedAt == nil {
		t.Errorf("stopped: %+v", st)
	}
	if _, err := s.StopSandbox(ctx, &sandboxAPI.StopSandboxRequest{SandboxID: "hp"}); err != nil {
		t.Errorf("second stop: %v", err)
	}
	if _, err := s.ShutdownSandbox(ctx, &sandboxAPI.ShutdownSandboxRequest{SandboxID: "hp"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PingSandbox(ctx, &sandboxAPI.PingRequest{SandboxID: "hp"}); !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		t.Errorf("ping after shutdown: %v", err)
	}
}

// The pod's kind binds its containers: in a HostProcess pod only
// HostProcess containers, and none in an ordinary pod.
func TestHostProcessPodKind(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cfg         *runtime.PodSandboxConfig
		netns       string
		hostProcess string // the container's annotation
	}{
		{"ordinary container in a HostProcess pod", hostProcessConfig(), "", "false"},
		{"HostProcess container in an ordinary pod", validConfig(), "5f1d6a3c-8e2b-4c7d-9a10-2b3c4d5e6f70", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, backend, _ := newService(t)
			ctx := context.Background()
			if _, err := s.CreateSandbox(ctx, &sandboxAPI.CreateSandboxRequest{SandboxID: "pod", BundlePath: t.TempDir(), Options: podConfig(t, tc.cfg), NetnsPath: tc.netns}); err != nil {
				t.Fatal(err)
			}
			bundle := t.TempDir()
			spec := &specs.Spec{
				Version:     specs.Version,
				Annotations: map[string]string{"microsoft.com/hostprocess-container": tc.hostProcess, "io.kubernetes.cri.container-type": "container"},
				Process:     &specs.Process{Args: []string{`C:\app.exe`}, Cwd: `C:\`, User: specs.User{Username: `NT AUTHORITY\SYSTEM`}},
				Windows:     &specs.Windows{Network: &specs.WindowsNetwork{}},
			}
			b, _ := json.Marshal(spec)
			if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o600); err != nil {
				t.Fatal(err)
			}
			rootfs := []mount.Mount{layermount.Layer{Path: "/s/c", Parents: []string{"/s/base"}}.Mount()}
			err := s.tasks.CreateTask(ctx, "c1", bundle, rootfs, process.Stdio{})
			if !errdefs.IsInvalidArgument(err) || backend.System("c1") != nil {
				t.Errorf("CreateTask = %v (system %v), want the kind refused", err, backend.System("c1"))
			}
		})
	}
}
