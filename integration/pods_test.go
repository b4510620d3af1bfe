//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"github.com/containerd/ttrpc"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/winproc/winproc/integration/node"
)

// importPauseImage imports the node's pause image, built for osVersion,
// unpacked unless noUnpack.
func importPauseImage(t *testing.T, n *node.Node, osVersion string, noUnpack bool) {
	t.Helper()
	args := []string{"images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter"}
	if noUnpack {
		args = append(args, "--no-unpack")
	}
	if _, err := n.Ctr(context.Background(), append(args, pauseImage(t, node.PauseImage, osVersion))...); err != nil {
		t.Fatal(err)
	}
}

// importPodImages imports the pause image and the test app's, built for
// the node's Windows build.
func importPodImages(t *testing.T, n *node.Node) {
	t.Helper()
	importPauseImage(t, n, node.HostBuild+".1", false)
	importTestApp(t, n)
}

// podConfig writes a CRI pod config for crictl, for a pod on the host's
// network.
func podConfig(t *testing.T, name string) string {
	t.Helper()
	return writeJSON(t, name+".json", podSpec(t, name, true))
}

// networkedPodConfig writes a CRI pod config for a pod with a network of
// its own: a network namespace with an address from the node's CNI bridge.
func networkedPodConfig(t *testing.T, name string) string {
	t.Helper()
	return writeJSON(t, name+".json", podSpec(t, name, false))
}

func podSpec(t *testing.T, name string, hostNetwork bool) map[string]any {
	cfg := map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"hostname":      name,
		"log_directory": t.TempDir(),
		"dns_config":    map[string]any{"servers": []string{"10.0.0.10"}, "searches": []string{"default.svc.cluster.local"}},
	}
	if hostNetwork {
		// containerd's CRI built for Linux reads the host network from
		// the Linux namespace options (NODE is 2).
		cfg["linux"] = map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}}
	}
	return cfg
}

// writeJSON writes v as JSON to a file name in a temporary directory and
// returns its path.
func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readJSON decodes the JSON file at path into v.
func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// runPod runs a pod with the winproc handler and returns its ID; the test's
// end stops and removes it if the test did not.
func runPod(t *testing.T, n *node.Node, name string) string {
	t.Helper()
	return runPodWith(t, n, name, podConfig(t, name))
}

// runPodWith is runPod with the pod config at cfg.
func runPodWith(t *testing.T, n *node.Node, name, cfg string) string {
	t.Helper()
	ctx := context.Background()
	out, err := n.Crictl(ctx, "runp", "--runtime", "winproc", cfg)
	if err != nil {
		t.Fatalf("runp %s: %v\n%s", name, err, out)
	}
	id := lastLine(out)
	t.Cleanup(func() {
		n.Crictl(ctx, "stopp", id)
		n.Crictl(ctx, "rmp", id)
	})
	return id
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// podState returns the pod's state as crictl shows it.
func podState(t *testing.T, n *node.Node, id string) string {
	t.Helper()
	out, err := n.Crictl(context.Background(), "inspectp", "-o", "json", id)
	if err != nil {
		t.Fatalf("inspectp: %v", err)
	}
	var st struct {
		Status struct{ State string } `json:"status"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); err != nil {
		t.Fatalf("inspectp output: %v\n%s", err, out)
	}
	return st.Status.State
}

// requireNoPodLeft checks that nothing of pod id remains: no shim, no
// compute system (mounts, processes, directories), no pause snapshot or
// lease.
func requireNoPodLeft(t *testing.T, n *node.Node, id string) {
	t.Helper()
	ctx := context.Background()
	// A pod's shim exits just after answering its removal.
	deadline := time.Now().Add(10 * time.Second)
	for len(n.Shims()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if shims := n.Shims(); len(shims) > 0 {
		t.Errorf("shims still running: %v", shims)
	}
	if id != "" {
		requireNoLeaks(t, n, id)
		if dir := n.SandboxBundle(id); exists(dir) {
			t.Errorf("the pod's sandbox state directory is left: %s", dir)
		}
	} else if entries, err := os.ReadDir(n.EmulationRoot()); err == nil && len(entries) > 0 {
		t.Errorf("compute systems left: %v", entries)
	}
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	for _, check := range [][]string{{"snapshots", "--snapshotter", "windowsfilter", "ls"}, {"leases", "ls"}} {
		out, err := n.Ctr(ctx, check...)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "winproc-sandbox-"+id) || id == "" && strings.Contains(out, "winproc-sandbox-") {
			t.Errorf("ctr %s still lists the pod's pause rootfs:\n%s", strings.Join(check, " "), out)
		}
	}
}

// Pods through crictl in containerd as shipped.
func TestPodLifecycle(t *testing.T) {
	n := node.StartWith(t, bins, node.Options{StockContainerd: true})
	importPauseImage(t, n, node.HostBuild+".1", false)
	ctx := context.Background()

	id := runPod(t, n, "web")
	if st := podState(t, n, id); st != "SANDBOX_READY" {
		t.Fatalf("pod state %s, want SANDBOX_READY", st)
	}
	out, err := n.Crictl(ctx, "pods")
	if err != nil || !strings.Contains(out, id[:13]) || !strings.Contains(out, "winproc") {
		t.Errorf("crictl pods:\n%s %v", out, err)
	}
	out, err = n.Crictl(ctx, "inspectp", id)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"winproc"`, `"hostname": "web"`, `default.svc.cluster.local`, node.PauseImage} {
		if !strings.Contains(out, want) {
			t.Errorf("crictl inspectp shows no %s:\n%.4000s", want, out)
		}
	}

	// Stopping twice is fine, as CRI requires.
	for i := 0; i < 2; i++ {
		if _, err := n.Crictl(ctx, "stopp", id); err != nil {
			t.Fatalf("stopp %d: %v", i, err)
		}
	}
	if st := podState(t, n, id); st != "SANDBOX_NOTREADY" {
		t.Errorf("state after stopp %s, want SANDBOX_NOTREADY", st)
	}
	if _, err := n.Crictl(ctx, "rmp", id); err != nil {
		t.Fatal(err)
	}
	if out, _ := n.Crictl(ctx, "pods", "-q"); strings.TrimSpace(lastLine(out)) == id {
		t.Errorf("pod still listed after rmp")
	}
	requireNoPodLeft(t, n, id)
}

func TestPodRefusesIncompatiblePauseImage(t *testing.T) {
	n := node.Start(t, bins)
	// The differ would refuse to unpack it; the shim must refuse it anyway.
	importPauseImage(t, n, "10.0.17763.1", true)
	out, err := n.Crictl(context.Background(), "runp", "--runtime", "winproc", podConfig(t, "old"))
	want := "is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("runp with an ltsc2019 pause image: %v\n%s\nwant the build message %q", err, out, want)
	}
	requireNoPodLeft(t, n, "")
}

func TestTwentyPodsConcurrently(t *testing.T) {
	n := node.Start(t, bins)
	importPauseImage(t, n, node.HostBuild+".1", false)
	ctx := context.Background()
	const pods = 20
	ids := make([]string, pods)
	errs := make([]error, pods)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := n.Crictl(ctx, "runp", "--runtime", "winproc", podConfig(t, fmt.Sprintf("pod-%02d", i)))
			ids[i], errs[i] = lastLine(out), err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("pod %d: %v", i, err)
		}
	}
	if t.Failed() {
		return
	}
	for _, id := range ids {
		if st := podState(t, n, id); st != "SANDBOX_READY" {
			t.Errorf("pod %s is %s", id, st)
		}
	}
	if len(n.Shims()) != pods {
		t.Errorf("%d shims for %d pods", len(n.Shims()), pods)
	}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := n.Crictl(ctx, "stopp", id); err != nil {
				t.Errorf("stopp %s: %v", id, err)
			}
			if _, err := n.Crictl(ctx, "rmp", id); err != nil {
				t.Errorf("rmp %s: %v", id, err)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		requireNoPodLeft(t, n, id)
	}
}

// A pod's container joins the pod's shim; an HTTP GET reaches the app
// through wincat exec'd in the sandbox (the port-forward of containerd
// 1.7: a task-API exec of `wincat.exe 127.0.0.1 PORT` in the sandbox, sent
// here to the shim directly, since containerd 2.x keeps no task for a
// sandbox the shim owns); the sandbox's metrics show the pod's usage.
func TestPodContainerAndPortForward(t *testing.T) {
	n := node.Start(t, bins)
	importPodImages(t, n)
	client := newClient(t, n)
	pod := runPod(t, n, "app")

	port := freePort(t)
	c := newContainer(t, n, client, testAppImage, "app-c", podMember{pod: pod, kind: "container", shimSandbox: true}, []string{testApp, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port)})
	out := &output{}
	task, err := c.NewTask(context.Background(), cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "listening on")
	if shims := n.Shims(); len(shims) != 1 {
		t.Fatalf("shims %v: the container did not join its pod's shim", shims)
	}

	socket, err := n.ShimSocket("app-c")
	if err != nil {
		t.Fatal(err)
	}
	ctx := namespaces.WithNamespace(context.Background(), node.Namespace)
	shim, err := node.DialTask(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	defer shim.Close()

	fifos, err := cio.NewFIFOSetInDir(t.TempDir(), "wincat", false)
	if err != nil {
		t.Fatal(err)
	}
	stdio, err := cio.NewDirectIO(ctx, fifos)
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	spec, _ := json.Marshal(&specs.Process{Args: []string{`C:\Windows\System32\wincat.exe`, "127.0.0.1", fmt.Sprint(port)}, Cwd: `C:\`})
	if _, err := shim.Exec(ctx, &taskAPI.ExecProcessRequest{
		ID: pod, ExecID: "port-forward", Stdin: fifos.Stdin, Stdout: fifos.Stdout,
		Spec: &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Process", Value: spec},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := shim.Start(ctx, &taskAPI.StartRequest{ID: pod, ExecID: "port-forward"}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdio.Stdin, "GET / HTTP/1.0\r\nHost: app\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stdio.Stdin.Close()
	answer, err := io.ReadAll(stdio.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(answer), "hello from winproc-testapp") {
		t.Errorf("through wincat in the sandbox: %q", answer)
	}
	wait, err := shim.Wait(ctx, &taskAPI.WaitRequest{ID: pod, ExecID: "port-forward"})
	if err != nil || wait.ExitStatus != 0 {
		t.Errorf("wincat exit: %v, %v", wait, err)
	}
	if _, err := shim.Delete(ctx, &taskAPI.DeleteRequest{ID: pod, ExecID: "port-forward"}); err != nil {
		t.Error(err)
	}

	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	sandboxes := ttrpc.NewClient(conn)
	defer sandboxes.Close()
	metrics, err := sandboxAPI.NewTTRPCSandboxClient(sandboxes).SandboxMetrics(ctx, &sandboxAPI.SandboxMetricsRequest{SandboxID: pod})
	if err != nil {
		t.Fatal(err)
	}
	v, err := typeurl.UnmarshalAny(metrics.Metrics.Data)
	if err != nil {
		t.Fatal(err)
	}
	w := v.(*wstats.Statistics).GetWindows()
	if w.GetProcessor().GetTotalRuntimeNS() == 0 || w.GetMemory().GetMemoryUsagePrivateWorkingSetBytes() == 0 {
		t.Errorf("pod metrics show no usage: %v", w)
	}
	t.Logf("pod usage: cpu %v, private working set %d bytes", time.Duration(w.GetProcessor().GetTotalRuntimeNS()), w.GetMemory().GetMemoryUsagePrivateWorkingSetBytes())
}

// A pod's shim killed while the pod and a container run: containerd runs
// the shim's `delete` for the sandbox and the container, the pod stops and
// is removed through crictl, and nothing of it is left: no shim, compute
// system (mount, process, directory), bundle, pause snapshot or lease.
func TestPodShimKilled(t *testing.T) {
	n := node.Start(t, bins)
	importPodImages(t, n)
	client := newClient(t, n)
	pod := runPod(t, n, "crashed")
	c := newContainer(t, n, client, testAppImage, "crashed-c", podMember{pod: pod, kind: "container", shimSandbox: true}, []string{testApp, "sleep", "-seconds", "0"})
	out := &output{}
	task, err := c.NewTask(context.Background(), cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	done, err := task.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "ready")
	shims := n.Shims()
	if len(shims) != 1 {
		t.Fatalf("shims %v, want the pod's one", shims)
	}
	if err := syscall.Kill(shims[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill the pod's shim: %v", err)
	}
	if st := waitStatus(t, done); st.ExitCode() != 255 {
		t.Errorf("container exit after its shim was killed: %d, want 255", st.ExitCode())
	}
	ctx := context.Background()
	waitPodNotReady(t, n, pod)
	// containerd deletes the task of a dead shim itself.
	if _, err := task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
		t.Fatalf("delete the container's task: %v", err)
	}
	if err := c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		t.Fatalf("delete the container: %v", err)
	}
	if _, err := n.Crictl(ctx, "stopp", pod); err != nil {
		t.Fatalf("stopp after the shim died: %v", err)
	}
	if _, err := n.Crictl(ctx, "rmp", pod); err != nil {
		t.Fatalf("rmp after the shim died: %v", err)
	}
	requireNoLeaksWithin(t, n, "crashed-c", time.Minute)
	requireNoPodLeft(t, n, pod)
}

// podsandbox mode (containerd's default sandboxer, and containerd 1.7's
// only one): containerd runs the pause container as a task whose spec says
// container-type sandbox; the pod's containers say only sandbox-id, and the
// shim groups them into the sandbox's shim (as runhcs). containerd 1.7's
// port-forward then execs wincat in the sandbox task through containerd.
func TestPodsandboxMode(t *testing.T) {
	n := node.Start(t, bins)
	importPodImages(t, n)
	client := newClient(t, n)
	ctx := context.Background()

	const pod = "podsandbox-pod"
	sandbox := newContainer(t, n, client, node.PauseImage, pod, podMember{pod: pod, kind: "sandbox"}, []string{`C:\pause.exe`})
	pause, err := sandbox.NewTask(ctx, cio.NullIO)
	if err != nil {
		t.Fatal(err)
	}
	if err := pause.Start(ctx); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	app := newContainer(t, n, client, testAppImage, "podsandbox-app", podMember{pod: pod, kind: "container"}, []string{testApp, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port)})
	out := &output{}
	task, err := app.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Start(ctx); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "listening on")
	if shims := n.Shims(); len(shims) != 1 {
		t.Fatalf("shims %v: the pod's container did not join the sandbox's shim", shims)
	}

	spec, err := pause.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := *spec.Process
	p.Args = []string{`C:\Windows\System32\wincat.exe`, "127.0.0.1", fmt.Sprint(port)}
	stdin, stdinW := io.Pipe()
	answer := &output{}
	wincat, err := pause.Exec(ctx, "port-forward", &p, cio.NewCreator(cio.WithStreams(stdin, answer, answer), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	done, err := wincat.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := wincat.Start(ctx); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdinW, "GET / HTTP/1.0\r\nHost: app\r\n\r\n")
	stdinW.Close()
	if err := wincat.CloseIO(ctx, containerd.WithStdinCloser); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, done); st.ExitCode() != 0 {
		t.Errorf("wincat exit code %d", st.ExitCode())
	}
	answer.waitFor(t, "hello from winproc-testapp")
	if _, err := wincat.Delete(ctx); err != nil {
		t.Error(err)
	}
}
