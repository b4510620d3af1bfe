//go:build linux

package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/internal/syncbuffer"
)

const testAppImage = "example.com/winproc/testapp:test"

// testApp is the path of winproc-testapp.exe in its image.
const testApp = `C:\winproc-testapp.exe`

// importTestApp builds the test app's image with the project's tooling and
// imports it into the node's windowsfilter snapshotter.
func importTestApp(t testing.TB, n *node.Node) {
	t.Helper()
	importTestAppAs(t, n, testAppImage, node.HostBuild+".1")
}

// importTestAppAs imports the test app as image ref built for osVersion.
func importTestAppAs(t testing.TB, n *node.Node, ref, osVersion string) {
	t.Helper()
	archive := imageArchive(t, ref, osVersion, testApp, map[string][]byte{"winproc-testapp.exe": winBin(t, "winproc-testapp.exe")})
	if _, err := n.Ctr(context.Background(), "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive); err != nil {
		t.Fatal(err)
	}
}

func newClient(t testing.TB, n *node.Node) *containerd.Client {
	t.Helper()
	c, err := containerd.New(n.Address, containerd.WithDefaultNamespace(node.Namespace))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// output collects a process's stdout and stderr.
type output struct{ syncbuffer.Buffer }

// waitFor waits until the output holds want.
func (o *output) waitFor(t testing.TB, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(o.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output never showed %q; it is:\n%s", want, o.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runtimeOpts are the handler options a containerd client passes itself
// (CRI takes them from config.toml).
func runtimeOpts(t testing.TB, n *node.Node) *runtimeoptions.Options {
	t.Helper()
	body, err := toml.Marshal(n.RuntimeOptions())
	if err != nil {
		t.Fatal(err)
	}
	return &runtimeoptions.Options{ConfigBody: body}
}

// startTestApp creates and starts a container of the test app with args, the
// way containerd's CRI would on Windows: a Windows spec, the windowsfilter
// snapshotter, the winproc runtime.
func startTestApp(t testing.TB, n *node.Node, client *containerd.Client, id string, args ...string) (containerd.Task, *output) {
	t.Helper()
	c := newContainer(t, n, client, testAppImage, id, podMember{}, append([]string{testApp}, args...))
	out := &output{}
	task, err := c.NewTask(context.Background(), cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatalf("create task: %v", err)
	}
	if err := task.Start(context.Background()); err != nil {
		t.Fatalf("start task: %v", err)
	}
	return task, out
}

// podMember says how a container belongs to a pod, if it does.
type podMember struct {
	// pod is the pod's sandbox ID.
	pod string
	// kind is CRI's container type: "sandbox" for the pause container of a
	// podsandbox pod, else "container".
	kind string
	// shimSandbox is set when the shim owns the pod (sandboxer "shim"): the
	// container names the sandbox. In podsandbox mode only CRI's
	// annotations tie it to the pod.
	shimSandbox bool
}

// newContainer makes the record of a container of image ref running args,
// as CRI would on Windows: a Windows spec, the windowsfilter snapshotter,
// the winproc runtime, and, for a pod's container, CRI's annotations. It is
// removed when the test ends.
func newContainer(t testing.TB, n *node.Node, client *containerd.Client, ref, id string, member podMember, args []string) containerd.Container {
	t.Helper()
	ctx := context.Background()
	image, err := client.GetImage(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	specOpts := []oci.SpecOpts{
		oci.WithProcessArgs(args...),
		oci.WithEnv([]string{"WINPROC_TEST=" + id}),
	}
	opts := []containerd.NewContainerOpts{
		containerd.WithImage(image),
		containerd.WithSnapshotter(containerdnames.Snapshotter),
		containerd.WithNewSnapshot(id, image),
		containerd.WithRuntime(containerdnames.RuntimeType, runtimeOpts(t, n)),
	}
	if member.pod != "" {
		specOpts = append(specOpts, oci.WithAnnotations(map[string]string{
			"io.kubernetes.cri.container-type": member.kind,
			"io.kubernetes.cri.sandbox-id":     member.pod,
		}))
	}
	if member.shimSandbox {
		opts = append(opts, containerd.WithSandbox(member.pod))
	}
	spec, err := oci.GenerateSpecWithPlatform(ctx, client, "windows/amd64", &containers.Container{ID: id}, specOpts...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewContainer(ctx, id, append(opts, containerd.WithSpec(spec))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if task, err := c.Task(ctx, nil); err == nil {
			task.Kill(ctx, syscall.SIGKILL)
			task.Delete(ctx, containerd.WithProcessKill)
		}
		c.Delete(ctx, containerd.WithSnapshotCleanup)
	})
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func waitStatus(t testing.TB, ch <-chan containerd.ExitStatus) containerd.ExitStatus {
	t.Helper()
	select {
	case st := <-ch:
		return st
	case <-time.After(90 * time.Second):
		t.Fatal("task did not exit")
	}
	return containerd.ExitStatus{}
}

// requireNoLeaksWithin waits up to limit for what containerd cleans up on
// its own (after a shim died) to be gone.
func requireNoLeaksWithin(t *testing.T, n *node.Node, id string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for len(n.Leaks(id)) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	requireNoLeaks(t, n, id)
}

// startSleeper starts a test app that waits for a console event, and
// returns its exit channel and its shim's PID.
func startSleeper(t *testing.T, n *node.Node, client *containerd.Client, id string) (containerd.Task, <-chan containerd.ExitStatus, int) {
	t.Helper()
	task, out := startTestApp(t, n, client, id, "sleep", "-seconds", "0")
	out.waitFor(t, "ready")
	done, err := task.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	shims := n.Shims()
	if len(shims) != 1 {
		t.Fatalf("shims of this node: %v, want 1", shims)
	}
	return task, done, shims[0]
}

// killTask sends sig to task and returns the exit status done, the
// channel of a Wait begun before, reports.
func killTask(t *testing.T, task containerd.Task, done <-chan containerd.ExitStatus, sig syscall.Signal) containerd.ExitStatus {
	t.Helper()
	if err := task.Kill(context.Background(), sig); err != nil {
		t.Fatal(err)
	}
	return waitStatus(t, done)
}

// deleteTask deletes the exited task and checks that nothing of id is
// left.
func deleteTask(t *testing.T, n *node.Node, task containerd.Task, id string) {
	t.Helper()
	if _, err := task.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	requireNoLeaks(t, n, id)
}

func requireNoLeaks(t *testing.T, n *node.Node, id string) {
	t.Helper()
	if leaks := n.Leaks(id); len(leaks) > 0 {
		t.Errorf("left behind by %s:\n%s", id, strings.Join(leaks, "\n"))
	}
}

func TestShimTaskLifecycle(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	client := newClient(t, n)
	ctx := context.Background()

	port := freePort(t)
	task, out := startTestApp(t, n, client, "app", "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port))
	out.waitFor(t, "listening on")
	if got := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); !strings.HasPrefix(got, "hello from winproc-testapp") {
		t.Errorf("GET / = %q", got)
	}

	// An exec's exit code comes back.
	execOut := &output{}
	spec, err := task.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := *spec.Process
	p.Args = []string{testApp, "exit", "7"}
	exec, err := task.Exec(ctx, "exit7", &p, cio.NewCreator(cio.WithStreams(nil, execOut, execOut), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	execDone, err := exec.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, execDone); st.ExitCode() != 7 {
		t.Errorf("exec exit code %d, want 7", st.ExitCode())
	}
	if _, err := exec.Delete(ctx); err != nil {
		t.Fatal(err)
	}

	// Statistics: CPU after a burn, memory of the running app.
	get(t, fmt.Sprintf("http://127.0.0.1:%d/burn?ms=400", port))
	metrics, err := task.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(metrics.Data)
	if err != nil {
		t.Fatal(err)
	}
	stats, ok := v.(*wstats.Statistics)
	if !ok {
		t.Fatalf("metrics are %T, want runhcs statistics", v)
	}
	w := stats.GetWindows()
	if w.GetProcessor().GetTotalRuntimeNS() == 0 || w.GetMemory().GetMemoryUsagePrivateWorkingSetBytes() == 0 {
		t.Errorf("stats report no CPU or memory: %v", w)
	}
	t.Logf("stats: cpu %v, private working set %d bytes", time.Duration(w.GetProcessor().GetTotalRuntimeNS()), w.GetMemory().GetMemoryUsagePrivateWorkingSetBytes())

	// SIGTERM reaches the app's console handler (as CTRL_C under Wine).
	done, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := killTask(t, task, done, syscall.SIGTERM); st.ExitCode() != 0 {
		t.Errorf("exit code after SIGTERM %d, want 0", st.ExitCode())
	}
	out.waitFor(t, "stopping: CTRL_")
	deleteTask(t, n, task, "app")
}

func TestShimSIGKILL(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	task, done, _ := startSleeper(t, n, newClient(t, n), "sleeper")
	if st := killTask(t, task, done, syscall.SIGKILL); st.ExitCode() == 0 {
		t.Errorf("exit code after SIGKILL is 0")
	}
	deleteTask(t, n, task, "sleeper")
}

// A shim killed with SIGKILL: containerd reports the task exited, and its
// `delete` of the dead shim leaves nothing behind.
func TestShimKilled(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	_, done, shim := startSleeper(t, n, newClient(t, n), "orphan")
	if err := syscall.Kill(shim, syscall.SIGKILL); err != nil {
		t.Fatalf("kill the shim: %v", err)
	}
	// containerd reports what the shim's `delete` answers: 255, as runhcs.
	if st := waitStatus(t, done); st.ExitCode() != 255 {
		t.Errorf("after the shim was killed containerd reported exit %d, want 255", st.ExitCode())
	}
	// containerd cleans up after a dead shim on its own, running our
	// `delete`, while it reports the exit.
	requireNoLeaksWithin(t, n, "orphan", time.Minute)
}

// containerd restarts while a task runs: the task keeps running, its output
// keeps arriving, and it stops normally.
func TestContainerdRestart(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	client := newClient(t, n)
	ctx := context.Background()

	port := freePort(t)
	_, out := startTestApp(t, n, client, "survivor", "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port))
	out.waitFor(t, "listening on")

	n.RestartContainerd(t)

	client = newClient(t, n)
	c, err := client.LoadContainer(ctx, "survivor")
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	status, err := task.Status(ctx)
	if err != nil || status.Status != containerd.Running {
		t.Fatalf("after restart the task is %v, %v; want running", status.Status, err)
	}
	get(t, fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
	out.waitFor(t, "GET /healthz")

	done, err := task.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := killTask(t, task, done, syscall.SIGTERM); st.ExitCode() != 0 {
		t.Errorf("exit code %d, want 0", st.ExitCode())
	}
	deleteTask(t, n, task, "survivor")
}

// What the shim's Go runtime prints when it dies (a panic; here a SIGQUIT,
// which dumps every goroutine the same way) reaches containerd's log: on
// Linux pkg/shim puts the shim's stderr on containerd's log fifo. The
// bundle's panic.log, which takes stderr before that (and on Windows for
// good), exists.
func TestShimPanicReachesContainerdLog(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	_, done, shim := startSleeper(t, n, newClient(t, n), "crashy")
	if _, err := os.Stat(filepath.Join(n.Bundle("crashy"), "panic.log")); err != nil {
		t.Errorf("bundle has no panic.log: %v", err)
	}
	syscall.Kill(shim, syscall.SIGQUIT)
	waitStatus(t, done)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(n.ContainerdLog(), "SIGQUIT: quit") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if log := n.ContainerdLog(); !strings.Contains(log, "SIGQUIT: quit") || !strings.Contains(log, "goroutine ") {
		t.Error("containerd's log does not hold the shim's goroutine dump")
	}
	requireNoLeaksWithin(t, n, "crashy", time.Minute)
}

// An image the host cannot run is refused when its task is created, with
// the build-matching message, even when its layers are already unpacked
// (here: shared with an ltsc2022 image, so the differ never saw them).
func TestCreateRefusesIncompatibleImage(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	const old = "example.com/winproc/testapp:ltsc2019"
	importTestAppAs(t, n, old, "10.0.17763.1")
	client := newClient(t, n)

	c := newContainer(t, n, client, old, "old", podMember{}, []string{testApp, "sleep", "-seconds", "0"})
	_, err := c.NewTask(context.Background(), cio.NullIO)
	want := `image "` + old + `" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`
	if err == nil || !strings.Contains(err.Error(), want) || !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("create task of an ltsc2019 image: %v\nwant FailedPrecondition with %q", err, want)
	}
	requireNoLeaks(t, n, "old")
}
