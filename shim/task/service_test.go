package task

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	taskv2 "github.com/containerd/containerd/api/runtime/task/v2"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/v2/core/runtime"
	"github.com/containerd/errdefs"
	"github.com/containerd/errdefs/pkg/errgrpc"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	runhcsopts "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/options"
	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/compute/computetest"
)

type harness struct {
	ctx      context.Context
	svc      *Service
	backend  *computetest.Backend
	events   *recorder
	shutdown *shutdownRecorder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{ctx: context.Background(), backend: computetest.NewBackend(), events: &recorder{}, shutdown: &shutdownRecorder{}}
	h.svc = New(h.backend, h.events, h.shutdown, nil)
	return h
}

// bundle writes a Windows spec the way containerd does for a CRI container.
func bundle(t *testing.T, mutate func(*specs.Spec)) string {
	t.Helper()
	dir := t.TempDir()
	spec := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{Args: []string{`C:\app.exe`, "serve"}, Cwd: `C:\`, Env: []string{"A=1"}},
		Root:    &specs.Root{},
		Windows: &specs.Windows{LayerFolders: []string{`C:\layers\2`, `C:\layers\1`, `C:\layers\scratch`}},
	}
	if mutate != nil {
		mutate(spec)
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (h *harness) create(t *testing.T, id string) {
	t.Helper()
	if _, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: id, Bundle: bundle(t, nil)}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
}

func (h *harness) start(t *testing.T, id, execID string) uint32 {
	t.Helper()
	resp, err := h.svc.Start(h.ctx, &taskAPI.StartRequest{ID: id, ExecID: execID})
	if err != nil {
		t.Fatalf("start %s/%s: %v", id, execID, err)
	}
	return resp.Pid
}

func (h *harness) exec(t *testing.T, id, execID string) {
	t.Helper()
	spec, _ := json.Marshal(&specs.Process{Args: []string{`C:\Windows\System32\cmd.exe`, "/c", "exit 3"}, Cwd: `C:\`})
	_, err := h.svc.Exec(h.ctx, &taskAPI.ExecProcessRequest{ID: id, ExecID: execID, Spec: &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Process", Value: spec}})
	if err != nil {
		t.Fatalf("exec %s: %v", execID, err)
	}
}

func (h *harness) wait(t *testing.T, id, execID string) *taskAPI.WaitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
	defer cancel()
	resp, err := h.svc.Wait(ctx, &taskAPI.WaitRequest{ID: id, ExecID: execID})
	if err != nil {
		t.Fatalf("wait %s/%s: %v", id, execID, err)
	}
	return resp
}

func is(t *testing.T, err error, class func(error) bool, what string) {
	t.Helper()
	if !class(errgrpc.ToNative(err)) {
		t.Errorf("%s: got %v", what, err)
	}
}

func TestTaskLifecycle(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	sys := h.backend.System("c1")
	if sys.Settings.Layers.Scratch != `C:\layers\scratch` || len(sys.Settings.Layers.Parents) != 2 {
		t.Fatalf("layers given to the backend: %+v", sys.Settings.Layers)
	}
	st, _ := h.svc.State(h.ctx, &taskAPI.StateRequest{ID: "c1"})
	if st.Status != task.Status_CREATED {
		t.Errorf("state after create: %v", st.Status)
	}

	pid := h.start(t, "c1", "")
	if pid != 1000 || !sys.Started {
		t.Errorf("start: pid %d, system started %v", pid, sys.Started)
	}
	is(t, second(h.svc.Start(h.ctx, &taskAPI.StartRequest{ID: "c1"})), errdefs.IsFailedPrecondition, "double start")

	h.exec(t, "c1", "e1")
	is(t, second(h.svc.Exec(h.ctx, &taskAPI.ExecProcessRequest{ID: "c1", ExecID: "e1", Spec: &anypb.Any{Value: []byte(`{"args":["x.exe"],"cwd":"C:\\"}`)}})), errdefs.IsAlreadyExists, "duplicate exec id")
	execPid := h.start(t, "c1", "e1")
	if execPid != 1001 {
		t.Errorf("exec pid %d", execPid)
	}
	sys.Proc(1).Exit(3)
	if w := h.wait(t, "c1", "e1"); w.ExitStatus != 3 {
		t.Errorf("exec exit %d, want 3", w.ExitStatus)
	}
	if _, err := h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "c1", ExecID: "e1"}); err != nil {
		t.Fatalf("delete exec: %v", err)
	}
	is(t, second(h.svc.State(h.ctx, &taskAPI.StateRequest{ID: "c1", ExecID: "e1"})), errdefs.IsNotFound, "state of deleted exec")

	is(t, second(h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "c1"})), errdefs.IsFailedPrecondition, "delete of running task")

	// SIGTERM is a CTRL_SHUTDOWN event; the program exits on it.
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	if sig := sys.Proc(0).Signals; len(sig) != 1 || sig[0] != compute.CtrlShutdown {
		t.Errorf("init received %v, want CTRL_SHUTDOWN", sig)
	}
	if w := h.wait(t, "c1", ""); w.ExitStatus != 0 {
		t.Errorf("init exit %d, want 0", w.ExitStatus)
	}
	// Wait returned only after the system was torn down and released.
	if !sys.ShutdownCalled || !sys.Closed {
		t.Errorf("after init exit: shutdown %v, closed %v; want both", sys.ShutdownCalled, sys.Closed)
	}
	is(t, second(h.svc.Exec(h.ctx, &taskAPI.ExecProcessRequest{ID: "c1", ExecID: "late", Spec: &anypb.Any{Value: []byte(`{"args":["x.exe"],"cwd":"C:\\"}`)}})), errdefs.IsFailedPrecondition, "exec after exit")

	del, err := h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "c1"})
	if err != nil || del.Pid != 1000 {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	is(t, second(h.svc.State(h.ctx, &taskAPI.StateRequest{ID: "c1"})), errdefs.IsNotFound, "state of deleted task")

	want := []string{
		runtime.TaskCreateEventTopic, runtime.TaskStartEventTopic,
		runtime.TaskExecAddedEventTopic, runtime.TaskExecStartedEventTopic, runtime.TaskExitEventTopic,
		runtime.TaskExitEventTopic, runtime.TaskDeleteEventTopic,
	}
	if got := h.events.list(); !reflect.DeepEqual(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}

	if _, err := h.svc.Shutdown(h.ctx, &taskAPI.ShutdownRequest{ID: "c1"}); err != nil || !h.shutdown.done {
		t.Errorf("shutdown with no task left: %v, done %v", err, h.shutdown.done)
	}
}

func TestGracefulShutdownFailsThenTerminate(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	sys := h.backend.System("c1")
	sys.ShutdownErr = errdefs.ErrUnavailable
	h.start(t, "c1", "")
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	if w := h.wait(t, "c1", ""); w.ExitStatus != 0 {
		t.Errorf("exit after SIGTERM %d, want 0", w.ExitStatus)
	}
	if !sys.ShutdownCalled || !sys.Terminated || !sys.Closed {
		t.Errorf("shutdown %v terminated %v closed %v; want all after a failed shutdown", sys.ShutdownCalled, sys.Terminated, sys.Closed)
	}
}

// A SIGKILLed task's system is terminated at once, with no graceful
// shutdown of what is left first: a kill asks for no grace, and a silo
// whose processes cannot take one would hold the exit past the kubelet's
// deadline.
func TestKilledTaskTerminatesAtOnce(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	sys := h.backend.System("c1")
	sys.Lingering = true
	h.start(t, "c1", "")
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGKILL)}); err != nil {
		t.Fatal(err)
	}
	if w := h.wait(t, "c1", ""); w.ExitStatus != 137 {
		t.Errorf("exit after SIGKILL %d, want 137", w.ExitStatus)
	}
	if sys.ShutdownCalled || !sys.Terminated || !sys.Closed {
		t.Errorf("shutdown %v terminated %v closed %v; want a terminate and no shutdown", sys.ShutdownCalled, sys.Terminated, sys.Closed)
	}
}

func TestKillAllEndsExecs(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	h.exec(t, "c1", "e1")
	h.start(t, "c1", "e1")
	sys := h.backend.System("c1")
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGKILL), All: true}); err != nil {
		t.Fatal(err)
	}
	if w := h.wait(t, "c1", "e1"); w.ExitStatus != 137 {
		t.Errorf("exec exit %d after kill all, want 137", w.ExitStatus)
	}
	h.wait(t, "c1", "")
	if !sys.Closed {
		t.Error("system not released")
	}
}

func TestErrors(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	tests := []struct {
		name  string
		call  func() error
		class func(error) bool
	}{
		{"create existing", func() error {
			return second(h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "c1", Bundle: bundle(t, nil)}))
		}, errdefs.IsAlreadyExists},
		{"create Linux spec", func() error {
			b := bundle(t, func(s *specs.Spec) { s.Linux = &specs.Linux{} })
			return second(h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "c2", Bundle: b}))
		}, errdefs.IsInvalidArgument},
		{"create without bundle", func() error {
			return second(h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "c3", Bundle: t.TempDir()}))
		}, errdefs.IsNotFound},
		// Not Unimplemented, which containerd retries with an older
		// task API.
		{"create refused by the backend", func() error {
			h.backend.CreateErr = fmt.Errorf("gMSA: %w", compute.ErrNotSupported)
			defer func() { h.backend.CreateErr = nil }()
			return second(h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "c4", Bundle: bundle(t, nil)}))
		}, errdefs.IsFailedPrecondition},
		{"state of unknown task", func() error { return second(h.svc.State(h.ctx, &taskAPI.StateRequest{ID: "nope"})) }, errdefs.IsNotFound},
		{"kill unknown exec", func() error {
			return second(h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", ExecID: "nope", Signal: 9}))
		}, errdefs.IsNotFound},
		{"exec in created task", func() error {
			return second(h.svc.Exec(h.ctx, &taskAPI.ExecProcessRequest{ID: "c1", ExecID: "e", Spec: &anypb.Any{Value: []byte(`{}`)}}))
		}, errdefs.IsFailedPrecondition},
		{"kill with SIGQUIT", func() error {
			return second(h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGQUIT)}))
		}, errdefs.IsFailedPrecondition},
		{"pause", func() error { return second(h.svc.Pause(h.ctx, &taskAPI.PauseRequest{ID: "c1"})) }, errdefs.IsNotImplemented},
		{"resume", func() error { return second(h.svc.Resume(h.ctx, &taskAPI.ResumeRequest{ID: "c1"})) }, errdefs.IsNotImplemented},
		{"checkpoint", func() error { return second(h.svc.Checkpoint(h.ctx, &taskAPI.CheckpointTaskRequest{ID: "c1"})) }, errdefs.IsNotImplemented},
		{"update without resources", func() error { return second(h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1"})) }, errdefs.IsInvalidArgument},
		{"update with two CPU limits", func() error {
			count, shares := uint64(2), uint16(500)
			return second(h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: windowsResources(t, &specs.WindowsResources{CPU: &specs.WindowsCPUResources{Count: &count, Shares: &shares}})}))
		}, errdefs.IsInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { is(t, tc.call(), tc.class, tc.name) })
	}
}

func TestDeleteOfCreatedTaskReleasesSystem(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	if _, err := h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if sys := h.backend.System("c1"); !sys.Closed {
		t.Error("deleting a never-started task left its compute system open")
	}
}

func TestUpdateAndStats(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	limit := uint64(512 << 20)
	maximum := uint16(5000)
	_, err := h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: windowsResources(t, &specs.WindowsResources{
		Memory: &specs.WindowsMemoryResources{Limit: &limit},
		CPU:    &specs.WindowsCPUResources{Maximum: &maximum},
	})})
	if err != nil {
		t.Fatal(err)
	}
	sys := h.backend.System("c1")
	// One kind of limit at a time, the memory last.
	if len(sys.Modified) != 2 || sys.Modified[0].CPUMaximum != maximum || sys.Modified[1].MemoryLimitBytes != limit {
		t.Errorf("modify: %+v", sys.Modified)
	}
	// Linux resources (what a Linux build of containerd's CRI sends) are
	// refused, not read as Windows ones.
	linux := &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/LinuxResources", Value: []byte(`{"memory":{"limit":1048576},"cpu":{"shares":512}}`)}
	if _, err := h.svc.Update(h.ctx, &taskAPI.UpdateTaskRequest{ID: "c1", Resources: linux}); !errdefs.IsInvalidArgument(errgrpc.ToNative(err)) || !strings.Contains(err.Error(), "Windows resources") {
		t.Errorf("update with Linux resources: %v", err)
	}
	if len(sys.Modified) != 2 {
		t.Errorf("Linux resources modified the system: %+v", sys.Modified)
	}

	resp, err := h.svc.Stats(h.ctx, &taskAPI.StatsRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(resp.Stats)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := v.(*wstats.Statistics)
	if !ok || w.GetWindows().GetProcessor().GetTotalRuntimeNS() != 5e6 || w.GetWindows().GetMemory().GetMemoryUsagePrivateWorkingSetBytes() != 1<<19 {
		t.Errorf("stats %T %v", v, v)
	}

	pids, err := h.svc.Pids(h.ctx, &taskAPI.PidsRequest{ID: "c1"})
	if err != nil || len(pids.Processes) != 1 || pids.Processes[0].Pid != 1000 {
		t.Errorf("pids %v, %v", pids, err)
	}
	sys.Proc(0).Exit(0)
	h.wait(t, "c1", "")
}

// containerd 1.7 speaks task v2; the same service answers it over ttrpc.
func TestTaskV2OverTTRPC(t *testing.T) {
	h := newHarness(t)
	server, err := ttrpc.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.RegisterTTRPC(server); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go server.Serve(h.ctx, l)
	t.Cleanup(func() { server.Close() })
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	client := ttrpc.NewClient(conn)
	t.Cleanup(func() { client.Close() })
	v2c := taskv2.NewTTRPCTaskClient(client)

	if _, err := v2c.Create(h.ctx, &taskv2.CreateTaskRequest{ID: "c1", Bundle: bundle(t, nil)}); err != nil {
		t.Fatal(err)
	}
	if _, err := v2c.Start(h.ctx, &taskv2.StartRequest{ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	st, err := v2c.State(h.ctx, &taskv2.StateRequest{ID: "c1"})
	if err != nil || st.Status != task.Status_RUNNING || st.Pid != 1000 {
		t.Fatalf("v2 state %+v, %v", st, err)
	}
	_, err = v2c.State(h.ctx, &taskv2.StateRequest{ID: "nope"})
	is(t, err, errdefs.IsNotFound, "v2 state of unknown task")
	h.backend.System("c1").Proc(0).Exit(4)
	w, err := v2c.Wait(h.ctx, &taskv2.WaitRequest{ID: "c1"})
	if err != nil || w.ExitStatus != 4 {
		t.Fatalf("v2 wait %+v, %v", w, err)
	}
}

func windowsResources(t *testing.T, r *specs.WindowsResources) *anypb.Any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/WindowsResources", Value: b}
}

func second[T any](_ T, err error) error { return err }

// Exec probes run every few seconds for days: each exec must leave no
// goroutine behind once it is deleted.
func TestExecsLeaveNoGoroutines(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	sys := h.backend.System("c1")

	probe := func(i int) {
		id := fmt.Sprintf("probe-%d", i)
		h.exec(t, "c1", id)
		h.start(t, "c1", id)
		sys.Proc(i + 1).Exit(0)
		h.wait(t, "c1", id)
		if _, err := h.svc.Delete(h.ctx, &taskAPI.DeleteRequest{ID: "c1", ExecID: id}); err != nil {
			t.Fatal(err)
		}
	}
	probe(0)
	baseline := settledGoroutines()
	for i := 1; i <= 300; i++ {
		probe(i)
	}
	if n := settledGoroutines(); n > baseline {
		t.Errorf("goroutines grew from %d to %d over 300 exec probes", baseline, n)
	}
	sys.Proc(0).Exit(0)
	h.wait(t, "c1", "")
}

// settledGoroutines counts goroutines once exiting ones have ended.
func settledGoroutines() int {
	n := goruntime.NumGoroutine()
	for i := 0; i < 50; i++ {
		time.Sleep(10 * time.Millisecond)
		m := goruntime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// As runhcs and containerd's runc shim, Create connects the task's stdio
// before it makes the compute system: a stdio that cannot be connected
// fails the create with no system made, and a system that cannot be made
// leaves the connected stdio closed and the task unknown.
func TestCreateConnectsStdioFirst(t *testing.T) {
	h := newHarness(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "taken.log")

	_, err := h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "bad", Bundle: bundle(t, nil), Stdin: filepath.Join(dir, "in"), Stdout: "file://" + log})
	if !errdefs.IsInvalidArgument(errgrpc.ToNative(err)) {
		t.Errorf("create with stdin and a log URI: %v, want InvalidArgument", err)
	}
	if _, err := h.backend.Open(h.ctx, "bad"); !errdefs.IsNotFound(err) {
		t.Errorf("a compute system was made for a task whose stdio failed: %v", err)
	}

	if _, err := h.backend.Create(h.ctx, "taken", &compute.Settings{}); err != nil {
		t.Fatal(err)
	}
	_, err = h.svc.Create(h.ctx, &taskAPI.CreateTaskRequest{ID: "taken", Bundle: bundle(t, nil), Stdout: "file://" + log})
	if !errdefs.IsAlreadyExists(errgrpc.ToNative(err)) {
		t.Fatalf("create over a taken system: %v, want AlreadyExists", err)
	}
	if _, err := os.Stat(log); err != nil {
		t.Errorf("the stdio was not connected before the compute system: %v", err)
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	for _, fd := range fds {
		if target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); target == log {
			t.Errorf("descriptor %s still holds the failed task's stdio", fd.Name())
		}
	}
	if _, err := h.svc.State(h.ctx, &taskAPI.StateRequest{ID: "taken"}); !errdefs.IsNotFound(errgrpc.ToNative(err)) {
		t.Errorf("state of the failed task: %v, want NotFound", err)
	}
}

// Pids answers as runhcs does: each process's details in runhcs's
// ProcessDetails, with the exec ID of the task's own processes (the task's
// ID for its init process).
func TestPidsDetails(t *testing.T) {
	defer func(was bool) { pidsWithDetails = was }(pidsWithDetails)
	pidsWithDetails = true
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	h.exec(t, "c1", "e1")
	h.start(t, "c1", "e1")
	resp, err := h.svc.Pids(h.ctx, &taskAPI.PidsRequest{ID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[uint32]*runhcsopts.ProcessDetails{
		1000: {ProcessID: 1000, ImageName: "app.exe", ExecID: "c1", UserTime_100Ns: 10_000_000},
		1001: {ProcessID: 1001, ImageName: "cmd.exe", ExecID: "e1", UserTime_100Ns: 10_010_000},
	}
	if len(resp.Processes) != len(want) {
		t.Fatalf("%d processes, want %d", len(resp.Processes), len(want))
	}
	for _, p := range resp.Processes {
		v, err := typeurl.UnmarshalAny(p.Info)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := v.(*runhcsopts.ProcessDetails)
		w := want[p.Pid]
		if !ok || w == nil || d.ProcessID != w.ProcessID || d.ImageName != w.ImageName || d.ExecID != w.ExecID || d.UserTime_100Ns != w.UserTime_100Ns || d.CreatedAt != nil {
			t.Errorf("process %d: %T %v, want %v", p.Pid, v, v, w)
		}
	}
	h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGKILL), All: true})
	h.wait(t, "c1", "")
}

// Where the shim's Pids goes to Linux builds of containerd and ctr (the
// emulation), it carries pids alone: they fail on an Info they cannot
// decode.
func TestPidsWithoutDetails(t *testing.T) {
	defer func(was bool) { pidsWithDetails = was }(pidsWithDetails)
	pidsWithDetails = false
	h := newHarness(t)
	h.create(t, "c1")
	h.start(t, "c1", "")
	resp, err := h.svc.Pids(h.ctx, &taskAPI.PidsRequest{ID: "c1"})
	if err != nil || len(resp.Processes) != 1 || resp.Processes[0].Pid != 1000 || resp.Processes[0].Info != nil {
		t.Errorf("pids %v, %v; want pid 1000 and no Info", resp, err)
	}
	h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGKILL), All: true})
	h.wait(t, "c1", "")
}

// A system that lingers after its first process exited is terminated at
// its own graceful deadline (a HostProcess container's 5 s), and the
// task's exit is final then.
func TestTeardownTakesTheSystemsGrace(t *testing.T) {
	h := newHarness(t)
	h.create(t, "c1")
	sys := h.backend.System("c1")
	sys.Lingering, sys.Grace = true, 50*time.Millisecond
	h.start(t, "c1", "")
	start := time.Now()
	if _, err := h.svc.Kill(h.ctx, &taskAPI.KillRequest{ID: "c1", Signal: uint32(syscall.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	h.wait(t, "c1", "")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the exit took %v; want about the system's 50 ms grace", d)
	}
	if !sys.ShutdownCalled || !sys.Terminated {
		t.Errorf("shutdown %v, terminated %v; want both", sys.ShutdownCalled, sys.Terminated)
	}
}
