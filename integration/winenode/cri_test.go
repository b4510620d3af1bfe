//go:build linux

package winenode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/winimage"
)

// The kubelet's way, on Windows: crictl.exe drives containerd.exe's own
// Windows CRI plugin, which runs a HostProcess pod on the shipped
// containerd-shim-winproc-v2.exe, whose containers are Windows processes
// in job objects, under Wine. Both sandbox modes; every verb a
// HostProcess DaemonSet's pod goes through; nothing left.
func TestCRIHostProcess(t *testing.T) {
	for _, sandboxer := range []string{"shim", "podsandbox"} {
		t.Run(sandboxer, func(t *testing.T) { criHostProcess(t, sandboxer) })
	}
}

// agentImage is a HostProcess image as Kubernetes' HostProcess base image
// makes them: one layer with the program, built for another build
// (ltsc2019) than the node's.
const agentImage = "winproc.test/agent:ltsc2019"

func criHostProcess(t *testing.T, sandboxer string) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: sandboxer, DefaultHandler: true})
	importTree(t, n, agentImage, "10.0.17763.1", "winproc-testapp.exe")
	if sandboxer == "podsandbox" {
		importTree(t, n, PauseImage, "10.0.20348.1", "pause.exe")
	}
	logs := t.TempDir()
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "agents", "namespace": "kube-system", "uid": "uid-agents"},
		"log_directory": WindowsPath(logs),
		"windows":       hostProcess(`NT AUTHORITY\SYSTEM`, true),
		"annotations":   inheritUser,
	})
	id := criRun(t, n, "runp", pod)
	if sandboxer == "shim" && len(n.ShimPIDs()) != 1 {
		t.Errorf("shims %v after runp, want the pod's one", n.ShimPIDs())
	}

	run := &podRun{t: t, n: n, id: id, logs: logs, program: "winproc-testapp.exe",
		create: func(name string, extra map[string]any, command ...string) string {
			return criCreateWith(t, n, id, pod, name, extra, command...)
		}}

	// A server on the node's loopback, stopped by a console event.
	port := freePort(t)
	server := run.create("server", nil, "winproc-testapp.exe", "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port))
	criRun(t, n, "start", server)
	waitFor(t, "the server's log", func() bool { return strings.Contains(containerLog(n, server), "listening") })
	if out := criRun(t, n, "ps", "--pod", id, "-q"); !strings.Contains(out, server) {
		t.Errorf("crictl ps --pod lists %q, not the server", out)
	}

	// exec: the program found on the rootfs by the shim, no shell.
	env := criRun(t, n, "exec", "-s", server, "winproc-testapp.exe", "env")
	mountPoint := envValue(env, "CONTAINER_SANDBOX_MOUNT_POINT")
	if !strings.HasPrefix(strings.ToLower(mountPoint), `c:\hpc\`) {
		t.Errorf("CONTAINER_SANDBOX_MOUNT_POINT is %q:\n%s", mountPoint, env)
	}
	if _, _, err := n.Crictl("exec", "-s", server, "winproc-testapp.exe", "exit", "7"); err == nil {
		t.Error("exec exiting 7 succeeded")
	}
	if _, errOut, err := n.Crictl("exec", "-s", server, "no-such-program.exe"); err == nil || !strings.Contains(errOut, "no-such-program.exe") {
		t.Errorf("exec of a missing program: %v\n%s", err, errOut)
	}

	// port-forward: containerd.exe dials the node's localhost for a
	// HostProcess pod.
	run.forward(port)
	run.streams(server)
	criRun(t, n, "update", "--memory", "268435456", server)
	run.resize(server, false)
	if out := criRun(t, n, "inspectp", "-o", "json", id); !strings.Contains(out, `"SANDBOX_READY"`) {
		t.Errorf("inspectp:\n%s", out)
	}
	run.podStats(sandboxer)

	// Wine's job accounting gives no CPU time or memory: the figures are
	// checked against the binding's fake (shim/jobcontainer).
	if stats := criRun(t, n, "stats", "-o", "json", "--id", server); !strings.Contains(stats, `"usageCoreNanoSeconds"`) || !strings.Contains(stats, `"workingSetBytes"`) {
		t.Errorf("crictl stats:\n%s", stats)
	}
	// A process an exec starts, detached, is in the container's job: it
	// ends with the container although it ignores the console event.
	criRun(t, n, "exec", "-s", server, "cmd", "/c", "start", "/b", "winproc-testapp.exe", "sleep", "-seconds", "0", "-ignore-events")
	waitFor(t, "the detached process", func() bool { return len(n.Processes("-ignore-events")) == 1 })

	// Exit codes exact, whole: no cmd /c between.
	for _, code := range []int{7, 255} {
		c := run.create(fmt.Sprint("exit", code), nil, "winproc-testapp.exe", "exit", fmt.Sprint(code))
		criRun(t, n, "start", c)
		if got := exitCode(t, n, c); got != code {
			t.Errorf("a container exiting %d: crictl inspect says %d", code, got)
		}
		criRun(t, n, "rm", c)
	}
	missing := run.create("missing", nil, "no-such-program.exe")
	if _, errOut, err := n.Crictl("start", missing); err == nil || !strings.Contains(errOut, "no-such-program.exe") {
		t.Errorf("start of a missing program: %v\n%s", err, errOut)
	}
	criRun(t, n, "rm", missing)

	run.stopGracefully(server)
	waitFor(t, "the end of the server's detached process with its container", func() bool { return len(n.Processes("-ignore-events")) == 0 })
	stubborn := run.stopAtDeadline()
	if !strings.Contains(containerLog(n, server), "GET /healthz") {
		t.Errorf("the server's log has no forwarded request:\n%s", containerLog(n, server))
	}
	criRun(t, n, "rm", server, stubborn)
	criRun(t, n, "stopp", id)
	criRun(t, n, "rmp", id)
	n.checkNothingLeft()
}

// podRun is a pod of the tier's tests, and how its containers are made:
// create makes container name running command, with extra in its CRI
// config; program is the test app as the containers name it.
type podRun struct {
	t                 *testing.T
	n                 *Node
	id, logs, program string
	create            func(name string, extra map[string]any, command ...string) string
}

// forward checks crictl port-forward to the pod's port: containerd.exe
// dials the pod's IP (or the node's localhost for a HostProcess pod).
func (p *podRun) forward(port int) {
	local := freePort(p.t)
	stop := p.n.Background(InstallDir+`\crictl.exe`, "--runtime-endpoint", CRIEndpoint, "port-forward", p.id, fmt.Sprintf("%d:%d", local, port))
	waitFor(p.t, "the forwarded port's answer", func() bool {
		body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", local))
		return err == nil && body != ""
	})
	stop()
}

// streams checks exec -i into container c and attach -i to a container of
// its own: every byte of stdin through containerd.exe's streaming server
// and the shim's named pipes, and back.
func (p *podRun) streams(c string) {
	t, n := p.t, p.n
	payload := strings.Repeat("through containerd.exe's exec\n", 2000)
	if out, errOut, err := n.CrictlStdin(strings.NewReader(payload), "exec", "-i", c, p.program, "echo"); err != nil || out != payload {
		t.Errorf("exec -i echo: %v; %d of %d bytes back\n%s", err, len(out), len(payload), errOut)
	}
	// attach: a container's own stdin, closed with the attach's.
	echo := p.create("echo", map[string]any{"stdin": true, "stdin_once": true}, p.program, "echo")
	criRun(t, n, "start", echo)
	if out, errOut, err := n.CrictlStdin(strings.NewReader(payload), "attach", "-i", echo); err != nil || out != payload {
		t.Errorf("attach -i: %v; %d of %d bytes back\n%s", err, len(out), len(payload), errOut)
	}
	if code := exitCode(t, n, echo); code != 0 {
		t.Errorf("the attached container exited %d", code)
	}
	criRun(t, n, "rm", echo)
}

// podStats checks crictl pods and statsp. containerd.exe's podSandboxStats
// needs the sandbox's task metric, which the shim gives in both modes, and
// the pod's process count from the sandbox's container record
// (getSandboxPidCount), which only podsandbox mode, install/'s default,
// makes: in shim mode it leaves the pod out (docs/cri-sandbox-modes.md).
// The count holds the pod's processes; CPU and memory are there, with the
// values the HCS stand-in gives (Wine's job accounting has no CPU time).
func (p *podRun) podStats(sandboxer string) {
	t, n := p.t, p.n
	if out := criRun(t, n, "pods", "-q"); out != p.id {
		t.Errorf("crictl pods -q: %q, want %s", out, p.id)
	}
	statsp := criRun(t, n, "statsp", "-o", "json", "--id", p.id)
	var got struct {
		Stats []struct {
			Attributes struct{ ID string }
			Windows    struct {
				CPU     *struct{ UsageCoreNanoSeconds *struct{ Value string } }
				Memory  *struct{ WorkingSetBytes *struct{ Value string } }
				Process *struct{ ProcessCount *struct{ Value string } }
			}
		}
	}
	if err := json.Unmarshal([]byte(statsp), &got); err != nil {
		t.Fatalf("crictl statsp: %v\n%s", err, statsp)
	}
	if listed := len(got.Stats) == 1 && got.Stats[0].Attributes.ID == p.id; listed != (sandboxer == "podsandbox") {
		t.Errorf("crictl statsp in %s mode lists the pod: %v\n%s", sandboxer, listed, statsp)
	}
	if sandboxer != "podsandbox" || len(got.Stats) != 1 {
		return
	}
	w := got.Stats[0].Windows
	if w.CPU == nil || w.CPU.UsageCoreNanoSeconds == nil || w.Memory == nil || w.Memory.WorkingSetBytes == nil ||
		w.Process == nil || w.Process.ProcessCount == nil || w.Process.ProcessCount.Value == "0" {
		t.Errorf("crictl statsp: the pod's CPU, memory or processes are missing\n%s", statsp)
	}
}

// stopGracefully stops container c, which takes the console event and
// exits 0 from its own handler, well before the stop's deadline.
func (p *podRun) stopGracefully(c string) {
	t := p.t
	start := time.Now()
	criRun(t, p.n, "stop", "--timeout", "30", c)
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the graceful stop took %v", d)
	}
	if code := exitCode(t, p.n, c); code != 0 {
		t.Errorf("container %s stopped with %d, want 0 from its own handler", c, code)
	}
}

// stopAtDeadline starts a container that ignores the console event and
// checks that crictl stop ends it at its deadline; it returns the
// container.
func (p *podRun) stopAtDeadline() string {
	t := p.t
	stubborn := p.create("stubborn", nil, p.program, "sleep", "-seconds", "0", "-ignore-events")
	criRun(t, p.n, "start", stubborn)
	waitFor(t, "the stubborn container's log", func() bool { return strings.Contains(containerLog(p.n, stubborn), "ready") })
	start := time.Now()
	criRun(t, p.n, "stop", "--timeout", "2", stubborn)
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the container that ignores the event stopped after %v, before its deadline", d)
	}
	return stubborn
}

// criRun runs crictl.exe and fails the test if it fails; it returns the
// last line of its output.
func criRun(t *testing.T, n *Node, args ...string) string {
	t.Helper()
	out, errOut, err := n.Crictl(args...)
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return strings.TrimSpace(out)
}

// criCreateWith creates HostProcess container name in pod.
func criCreateWith(t *testing.T, n *Node, pod, podConfig, name string, extra map[string]any, command ...string) string {
	t.Helper()
	return criCreateContainer(t, n, pod, podConfig, map[string]any{
		"metadata":    map[string]any{"name": name},
		"image":       map[string]any{"image": agentImage},
		"command":     command,
		"log_path":    name + ".log",
		"windows":     hostProcess(`NT AUTHORITY\SYSTEM`, false),
		"annotations": inheritUser,
	}, extra)
}

// criCreateContainer creates a container of the CRI config base, with
// extra over it, in pod, and returns its id.
func criCreateContainer(t *testing.T, n *Node, pod, podConfig string, base, extra map[string]any) string {
	t.Helper()
	maps.Copy(base, extra)
	name := base["metadata"].(map[string]any)["name"].(string)
	return criRun(t, n, "create", pod, criJSON(t, name+".json", base), podConfig)
}

// inheritUser runs a HostProcess container's processes with the shim's
// own token: Wine's token is an ordinary user's, never SYSTEM's, and Wine
// has no local accounts to log on as; the users' logic is tested against
// a fake of the binding (shim/jobcontainer).
var inheritUser = map[string]string{"microsoft.com/hostprocess-inherit-user": "true"}

// hostProcess is the CRI Windows config of a HostProcess pod (with the
// node's network) or container.
func hostProcess(user string, pod bool) map[string]any {
	sc := map[string]any{"host_process": true, "run_as_username": user}
	if pod {
		sc["namespace_options"] = map[string]any{"network": 2} // NODE
	}
	return map[string]any{"security_context": sc}
}

// criJSON writes v as JSON and returns the file's Windows path.
func criJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return WindowsPath(p)
}

// importTree imports an image of one layer holding the named programs
// of the project, and an empty directory work, into the CRI's namespace.
func importTree(t *testing.T, n *Node, ref, osVersion string, programs ...string) {
	t.Helper()
	tree := t.TempDir()
	if err := os.Mkdir(filepath.Join(tree, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range programs {
		b, err := os.ReadFile(filepath.Join(bins.Project, p))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, p), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	layer, err := winimage.LayerFromTree(context.Background(), tree)
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Build(winimage.Config{OSVersion: osVersion, Entrypoint: programs[:1]}, layer)
	if err != nil {
		t.Fatal(err)
	}
	importBuilt(t, n, "k8s.io", ref, img)
}

// exitCode waits for container c to exit and returns its exit code.
func exitCode(t *testing.T, n *Node, c string) int {
	t.Helper()
	var code int
	waitFor(t, "container "+c+" to exit", func() bool {
		out, _, err := n.Crictl("inspect", "-o", "json", c)
		if err != nil {
			return false
		}
		var v struct {
			Status struct {
				State    string `json:"state"`
				ExitCode int    `json:"exitCode"`
			} `json:"status"`
		}
		if json.Unmarshal([]byte(out), &v) != nil || v.Status.State != "CONTAINER_EXITED" {
			return false
		}
		code = v.Status.ExitCode
		return true
	})
	return code
}

// containerLog is what `crictl logs` gives of container c, as a user
// reads a container's log: containerd.exe's CRI reads the log file the
// shim's output went to. "" when crictl fails.
func containerLog(n *Node, c string) string {
	out, errOut, err := n.Crictl("logs", c)
	if err != nil {
		return ""
	}
	return out + errOut
}

func envValue(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	return ""
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

func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in a minute", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkNothingLeft fails the test if anything of a removed pod is left:
// a pod or container in the CRI, a shim, a container's process, a
// container's snapshot, its mount point under C:\hpc, or a binding or
// volume of the stand-ins.
func (n *Node) checkNothingLeft() {
	t := n.t.(*testing.T)
	t.Helper()
	if out := criRun(t, n, "pods", "-q"); out != "" {
		t.Errorf("pods left: %s", out)
	}
	if out := criRun(t, n, "ps", "-a", "-q"); out != "" {
		t.Errorf("containers left: %s", out)
	}
	waitFor(t, "the shims' exit", func() bool { return len(n.ShimPIDs()) == 0 })
	if pids := n.Processes("winproc-testapp.exe"); len(pids) != 0 {
		t.Errorf("container processes left: %v", pids)
	}
	for _, k := range snapshotKeys(t, n, "k8s.io") {
		if !strings.HasPrefix(k, "sha256:") {
			t.Errorf("snapshot %s left", k)
		}
	}
	for _, dir := range []string{`C:\hpc`, `C:\ProgramData\winproc-standins\mappings`, `C:\ProgramData\winproc-standins\volumes`} {
		entries, err := os.ReadDir(n.Path(dir))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, e := range entries {
			t.Errorf("%s left in %s", e.Name(), dir)
		}
	}
}
