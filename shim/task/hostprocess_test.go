package task

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// hostProcess makes a spec a HostProcess container's of the given CRI
// container type, as containerd's CRI makes it.
func hostProcess(hp bool, containerType string) func(*specs.Spec) {
	return func(s *specs.Spec) {
		v := "false"
		if hp {
			v = "true"
			s.Process.User.Username = `NT AUTHORITY\SYSTEM`
		}
		s.Annotations = map[string]string{"microsoft.com/hostprocess-container": v, "io.kubernetes.cri.container-type": containerType}
	}
}

// In podsandbox mode the pod's kind comes from its pause container's spec;
// its containers must be of that kind. A HostProcess container's image is
// not checked against the host's build.
func TestPodsandboxHostProcessKind(t *testing.T) {
	h := newHarness(t)
	checked := 0
	h.svc.checkImage = func(context.Context, string) error { checked++; return nil }
	create := func(id string, mutate func(*specs.Spec)) error {
		_, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: id, Bundle: bundle(t, mutate)})
		return errgrpc.ToNative(err)
	}
	if err := create("pause", hostProcess(true, "sandbox")); err != nil {
		t.Fatal(err)
	}
	// Nothing runs for a HostProcess pod's pause container (runhcs fakes
	// it too): no compute system, a task of pid 0 until it is stopped.
	if s := h.backend.System("pause"); s != nil {
		t.Fatalf("a HostProcess pod's pause container made a compute system: %+v", s)
	}
	if pid := h.start(t, "pause", ""); pid != 0 {
		t.Errorf("the pause task's pid is %d", pid)
	}
	if st, err := h.svc.Stats(h.ctx, &taskAPI.StatsRequest{ID: "pause"}); err != nil || st.Stats == nil {
		t.Errorf("Stats of the pause task: %v, %v", st, err)
	}
	if err := create("ordinary", hostProcess(false, "container")); !errdefs.IsInvalidArgument(err) {
		t.Errorf("an ordinary container in a HostProcess pod: %v", err)
	}
	if err := create("agent", hostProcess(true, "container")); err != nil {
		t.Errorf("a HostProcess container in a HostProcess pod: %v", err)
	}
	if checked != 0 {
		t.Errorf("the image check ran %d times for HostProcess containers", checked)
	}
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "pause", Signal: 15}); err != nil {
		t.Fatal(err)
	}
	if w := h.wait(t, "pause", ""); w.ExitStatus != 0 {
		t.Errorf("the pause task exited %d after SIGTERM, want 0", w.ExitStatus)
	}

	h = newHarness(t)
	h.svc.checkImage = func(context.Context, string) error { checked++; return nil }
	if err := create("pause", hostProcess(false, "sandbox")); err != nil {
		t.Fatal(err)
	}
	if err := create("agent", hostProcess(true, "container")); !errdefs.IsInvalidArgument(err) {
		t.Errorf("a HostProcess container in an ordinary pod: %v", err)
	}
	if checked != 1 {
		t.Errorf("the image check ran %d times, want once (the pause container)", checked)
	}
}

// In podsandbox mode the pause container's CreateTask runs the pod check
// (the pod config shim mode's sandbox service validates), and refuses the
// pod with its error; the pod's other containers do not run it.
func TestPodsandboxPodCheck(t *testing.T) {
	h := newHarness(t)
	var checked []string
	h.svc.SetPodCheck(func(_ context.Context, id string) error {
		checked = append(checked, id)
		return fmt.Errorf("pod %q: privileged (CRI linux.security_context.privileged): %w", id, errdefs.ErrInvalidArgument)
	})
	sandbox := func(s *specs.Spec) {
		s.Annotations = map[string]string{"io.kubernetes.cri.container-type": "sandbox"}
	}
	_, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "pod", Bundle: bundle(t, sandbox)})
	is(t, err, errdefs.IsInvalidArgument, "a refused pod's pause container")
	if err == nil || !strings.Contains(err.Error(), "privileged") {
		t.Errorf("the refusal does not name the field: %v", err)
	}
	if h.backend.System("pod") != nil {
		t.Error("a refused pod made a compute system")
	}
	if _, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "app", Bundle: bundle(t, nil)}); err != nil {
		t.Errorf("a container: %v", err)
	}
	if !slices.Equal(checked, []string{"pod"}) {
		t.Errorf("the pod check ran for %v, want the pause container only", checked)
	}
}

// In shim mode a HostProcess pod's sandbox is the task of
// HostProcessPodSpec, the same stand-in as containerd's pause container
// gets in podsandbox mode: no compute system, a task of pid 0. It binds
// the pod's kind, keeps the shim serving once the pod's last container is
// gone, answers statistics (containerd's Windows CRI fails every pod's
// stats without them), and the shim goes once it is deleted.
func TestHostProcessPodSpec(t *testing.T) {
	h := newHarness(t)
	if err := h.svc.CreateFromSpec(h.ctx, "pod", t.TempDir(), HostProcessPodSpec("pod"), nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := h.backend.System("pod"); s != nil {
		t.Fatalf("a HostProcess pod's sandbox made a compute system: %+v", s)
	}
	create := func(id string, mutate func(*specs.Spec)) error {
		_, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: id, Bundle: bundle(t, mutate)})
		return errgrpc.ToNative(err)
	}
	if err := create("ordinary", hostProcess(false, "container")); !errdefs.IsInvalidArgument(err) {
		t.Errorf("an ordinary container in a HostProcess pod: %v", err)
	}
	if pid := h.start(t, "pod", ""); pid != 0 {
		t.Errorf("the sandbox task's pid is %d", pid)
	}
	if _, err := h.svc.Shutdown(h.ctx, &taskAPI.ShutdownRequest{ID: "c1"}); err != nil || h.shutdown.done {
		t.Fatalf("shutdown while the sandbox stays: %v, done %v", err, h.shutdown.done)
	}
	if st, err := h.svc.Stats(h.ctx, &taskAPI.StatsRequest{ID: "pod"}); err != nil || st.Stats == nil {
		t.Errorf("Stats of the sandbox: %v, %v", st, err)
	}
	if _, err := h.svc.Stats(h.ctx, &taskAPI.StatsRequest{ID: "other"}); !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		t.Errorf("Stats of an unknown task: %v", err)
	}
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "pod", Signal: 15}); err != nil {
		t.Fatal(err)
	}
	if w := h.wait(t, "pod", ""); w.ExitStatus != 0 {
		t.Errorf("the sandbox task exited %d after SIGTERM, want 0", w.ExitStatus)
	}
	if _, err := h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "pod"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Shutdown(h.ctx, &taskAPI.ShutdownRequest{ID: "c1"}); err != nil || !h.shutdown.done {
		t.Errorf("shutdown once the sandbox is gone: %v, done %v", err, h.shutdown.done)
	}
}
