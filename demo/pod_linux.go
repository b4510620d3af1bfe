//go:build linux

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/winproc/winproc/integration/emulatednode"
)

// The labels the kubelet always sets on a pod's sandbox and containers
// (k8s.io/kubelet pkg/types/labels.go; the kubelet's kuberuntime
// newPodLabels and newContainerLabels), by which `crictl ps` shows a
// container's POD and NAMESPACE.
const (
	podNameLabel       = "io.kubernetes.pod.name"
	podNamespaceLabel  = "io.kubernetes.pod.namespace"
	podUIDLabel        = "io.kubernetes.pod.uid"
	containerNameLabel = "io.kubernetes.container.name"
	podNamespace       = "default"
	podUID             = "uid-" + podName
)

// podLabels are the labels the kubelet sets on the pod's sandbox.
func podLabels() map[string]string {
	return map[string]string{podNameLabel: podName, podNamespaceLabel: podNamespace, podUIDLabel: podUID}
}

// containerLabels are the labels the kubelet sets on the pod's container
// called name: the pod's, and the container's name.
func containerLabels(name string) map[string]string {
	l := podLabels()
	l[containerNameLabel] = name
	return l
}

// showsPod checks that `crictl ps` shows container id's pod and namespace,
// as on a node the kubelet runs, not "unknown".
func showsPod(ps, id string) error {
	for _, line := range strings.Split(ps, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || !strings.HasPrefix(id, fields[0]) {
			continue
		}
		if !slices.Contains(fields, podName) || !slices.Contains(fields, podNamespace) {
			return fmt.Errorf("crictl ps shows container %s without its pod %s in namespace %s: %q", id, podName, podNamespace, line)
		}
		return nil
	}
	return fmt.Errorf("crictl ps does not list container %s: %q", id, ps)
}

func (d *demo) runPod(ctx context.Context) error {
	d.t.section("Run a pod through CRI")
	cfg := map[string]any{
		"metadata":      map[string]any{"name": podName, "namespace": podNamespace, "uid": podUID, "attempt": 0},
		"labels":        podLabels(),
		"hostname":      podName,
		"log_directory": filepath.Join(d.dir, "logs"),
		"dns_config":    map[string]any{"servers": []string{"10.0.0.10"}, "searches": []string{"default.svc.cluster.local"}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "pod.json"), b, 0o644); err != nil {
		return err
	}
	d.t.note(
		"A pod with a network of its own: containerd makes it a network namespace, where the node's",
		"CNI (bridge, host-local) gives it an address. The runtime handler winproc sends the pod to",
		"containerd-shim-winproc-v2's sandbox API, which prepares the pause image's rootfs and",
		"starts C:\\pause.exe in the pod's compute system, every process of which runs in that",
		"namespace (on Windows: the pod's HNS namespace).",
	)
	d.t.command("cat pod.json")
	d.t.output(string(b))
	out, err := d.sh(ctx, "", d.tool("crictl"), "runp", "--runtime", handler, filepath.Join(d.dir, "pod.json"))
	if err != nil {
		return err
	}
	d.pod = lastLine(out)
	d.cleanups = append(d.cleanups, func() {
		d.quiet(context.Background(), d.tool("crictl"), "stopp", d.pod)
		d.quiet(context.Background(), d.tool("crictl"), "rmp", d.pod)
	})
	if _, err = d.sh(ctx, "", d.tool("crictl"), "pods"); err != nil {
		return err
	}
	ip, err := d.sh(ctx, "", d.tool("crictl"), "inspectp", "-o", "go-template", "--template", "{{.status.network.ip}}", d.pod)
	if err != nil {
		return err
	}
	if d.podIP = net.ParseIP(strings.TrimSpace(ip)); d.podIP == nil || !d.node.PodSubnet.Contains(d.podIP) {
		return fmt.Errorf("the pod's address %q is not in the node's pod network %s", ip, d.node.PodSubnet)
	}
	return nil
}

func (d *demo) startContainer(ctx context.Context) error {
	d.t.section("Start the test app in the pod")
	d.t.note(
		"`crictl create` and `crictl start`, as the kubelet does. This node's containerd is v2.4.2",
		"with a small patch that lets its CRI, built for Linux, make a Windows container's spec as",
		"its Windows build does (docs/test-node.md); the winproc handler does the rest.",
	)
	var err error
	if d.port, err = freePort(); err != nil {
		return err
	}
	container, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "app"},
		"labels":   containerLabels("app"),
		"image":    map[string]any{"image": appRef},
		"command":  []string{testApp, "serve", "-addr", fmt.Sprintf("0.0.0.0:%d", d.port)},
		"envs":     []map[string]string{{"key": "GREETING", "value": "hello from the winproc demo"}},
		"log_path": "app.log",
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "container.json"), append(container, '\n'), 0o644); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", "cat", "container.json"); err != nil {
		return err
	}
	out, err := d.sh(ctx, "", d.tool("crictl"), "create", d.pod, filepath.Join(d.dir, "container.json"), filepath.Join(d.dir, "pod.json"))
	if err != nil {
		return err
	}
	d.app = lastLine(out)
	d.cleanups = append(d.cleanups, func() {
		d.quiet(context.Background(), d.tool("crictl"), "stop", "-t", "0", d.app)
		d.quiet(context.Background(), d.tool("crictl"), "rm", "-f", d.app)
	})
	if _, err := d.sh(ctx, "", d.tool("crictl"), "start", d.app); err != nil {
		return err
	}
	if err := d.waitLog(ctx, "listening on"); err != nil {
		return err
	}
	ps, err := d.sh(ctx, "", d.tool("crictl"), "ps")
	if err != nil {
		return err
	}
	if err := showsPod(ps, d.app); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("ctr"), "tasks", "ls"); err != nil {
		return err
	}
	ps, err = d.sh(ctx, "", d.tool("ctr"), "tasks", "ps", d.app)
	if err != nil {
		return err
	}
	var names []string
	for _, l := range strings.Split(ps, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Trim(f[0], "0123456789") == "" {
			comm, _ := os.ReadFile(filepath.Join("/proc", f[0], "comm"))
			names = append(names, f[0]+" "+strings.TrimSpace(string(comm)))
		}
	}
	d.t.note("The container's processes: its Wine silo's (" + strings.Join(names, ", ") + ").")
	shims := d.node.Shims()
	if len(shims) != 1 {
		return fmt.Errorf("shims serving this node: %v, want one (the container joins its pod's shim)", shims)
	}
	d.t.note(fmt.Sprintf("One shim (PID %d) serves the pod and its container.", shims[0]))
	_, err = d.sh(ctx, "", d.tool("crictl"), "logs", d.app)
	return err
}

// waitLog waits until the app's log, as crictl shows it, holds want.
func (d *demo) waitLog(ctx context.Context, want string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := d.quiet(ctx, d.tool("crictl"), "logs", d.app)
		if err == nil && strings.Contains(out, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the app's log has no %q after a minute: %v\n%s", want, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *demo) exec(ctx context.Context) error {
	d.t.section("Exec into the container")
	out, err := d.sh(ctx, "", d.tool("crictl"), "exec", "-s", d.app, testApp, "env")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "GREETING=hello from the winproc demo") {
		return errors.New("exec of env: the output lacks the container's environment")
	}
	return nil
}

func (d *demo) stats(ctx context.Context) error {
	d.t.section("Statistics")
	d.t.note("The pod's usage from the shim's sandbox API (SandboxMetrics: runhcs's Windows statistics),")
	d.t.note("and the container's through CRI (`crictl stats`, from the same statistics of its task).")
	ctx = namespaces.WithNamespace(ctx, namespace)
	c, err := d.node.DialShim(ctx, d.app)
	if err != nil {
		return err
	}
	defer c.Close()
	d.t.call(fmt.Sprintf("sandbox.SandboxMetrics(ctx, {SandboxID: %q})", short(d.pod)))
	metrics, err := sandboxAPI.NewTTRPCSandboxClient(c).SandboxMetrics(ctx, &sandboxAPI.SandboxMetricsRequest{SandboxID: d.pod})
	if err != nil {
		return err
	}
	pod, err := windowsStats(metrics.GetMetrics().GetData())
	if err != nil {
		return err
	}
	d.t.output(pod)
	if _, err := d.sh(ctx, "", d.tool("crictl"), "stats", "-o", "yaml", d.app); err != nil {
		return err
	}
	d.t.note("The pod's through CRI: containerd-wincri decodes the shim's Windows statistics as the",
		"Windows build does (docs/test-node.md).")
	out, err := d.sh(ctx, "", d.tool("crictl"), "statsp")
	if err != nil {
		return err
	}
	if !strings.Contains(out, podName) {
		return fmt.Errorf("crictl statsp does not list the pod:\n%s", out)
	}
	d.t.note("The pod as CRI reports it; the \"winproc\" part is the shim's pod settings.")
	if _, err := d.sh(ctx, "", d.tool("crictl"), "pods"); err != nil {
		return err
	}
	_, err = d.sh(ctx, "", d.tool("crictl"), "inspectp", d.pod)
	return err
}

// bootstrapPath is where containerd records the address of the shim serving
// the app container (and so the pod).
func (d *demo) bootstrapPath() string {
	return filepath.Join(d.node.Bundle(d.app), "bootstrap.json")
}

// windowsStats renders runhcs-format statistics.
func windowsStats(data *anypb.Any) (string, error) {
	v, err := typeurl.UnmarshalAny(data)
	if err != nil {
		return "", err
	}
	s, ok := v.(*wstats.Statistics)
	if !ok {
		return "", fmt.Errorf("statistics are %T, want runhcs's Statistics", v)
	}
	w := s.GetWindows()
	p, m, st := w.GetProcessor(), w.GetMemory(), w.GetStorage()
	if p.GetTotalRuntimeNS() == 0 || m.GetMemoryUsagePrivateWorkingSetBytes() == 0 {
		return "", fmt.Errorf("statistics show no usage: %v", w)
	}
	return fmt.Sprintf("cpu total %v (user %v, kernel %v)\nmemory commit %s (peak %s), private working set %s\nstorage read %d ops / %s, written %d ops / %s",
		time.Duration(p.GetTotalRuntimeNS()).Round(time.Millisecond), time.Duration(p.GetRuntimeUserNS()).Round(time.Millisecond), time.Duration(p.GetRuntimeKernelNS()).Round(time.Millisecond),
		mib(m.GetMemoryUsageCommitBytes()), mib(m.GetMemoryUsageCommitPeakBytes()), mib(m.GetMemoryUsagePrivateWorkingSetBytes()),
		st.GetReadCountNormalized(), mib(st.GetReadSizeBytes()), st.GetWriteCountNormalized(), mib(st.GetWriteSizeBytes())), nil
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (d *demo) teardown(ctx context.Context) error {
	d.t.section("Tear down")
	d.t.note("Stop the app: for a Windows process SIGTERM is CTRL_SHUTDOWN_EVENT; Wine can deliver",
		"console events only as SIGINT, so under the emulation the app sees CTRL_C_EVENT, handles it",
		"and exits 0.")
	if _, err := d.sh(ctx, "", d.tool("crictl"), "stop", "-t", "10", d.app); err != nil {
		return err
	}
	out, err := d.quiet(ctx, d.tool("crictl"), "inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.exitCode}}", d.app)
	if err != nil {
		return err
	}
	d.t.command(`crictl inspect -o go-template --template "{{.status.state}} {{.status.exitCode}}" ` + short(d.app))
	d.t.output(out)
	if strings.TrimSpace(out) != "CONTAINER_EXITED 0" {
		return fmt.Errorf("after crictl stop the app is %q, want CONTAINER_EXITED 0", strings.TrimSpace(out))
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "logs", "--tail", "1", d.app); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "rm", d.app); err != nil {
		return err
	}
	for _, args := range [][]string{{"stopp", d.pod}, {"rmp", d.pod}, {"pods"}} {
		if _, err := d.sh(ctx, "", append([]string{d.tool("crictl")}, args...)...); err != nil {
			return err
		}
	}
	// The pod's shim exits just after answering its removal.
	left := d.node.Processes()
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = d.node.Processes() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		return fmt.Errorf("after rmp these processes of the pod still run: %v", left)
	}

	d.t.note("Stop containerd and the snapshotter as a service manager would (SIGTERM).")
	for _, dm := range []*emulatednode.Daemon{d.containerd, d.snapshotter} {
		d.t.command(fmt.Sprintf("kill %d   # %s", dm.Cmd.Process.Pid, dm.Name))
		if err := dm.Stop(daemonStopGrace); err != nil {
			return err
		}
	}
	mounts := emulatednode.Mounts(d.dir)
	d.t.command("grep -c " + d.dir + " /proc/mounts")
	d.t.output(fmt.Sprint(len(mounts)))
	if len(mounts) > 0 {
		return fmt.Errorf("mounts left behind: %v", mounts)
	}
	dir := d.dir
	d.t.command("cd / && rm -rf " + dir)
	d.t.dir = ""
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return nil
}
