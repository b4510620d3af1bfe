//go:build linux

package winenode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// appImage is a process-isolated container's image: the test app on a
// layer for the node's build.
const appImage = "winproc.test/app:ltsc2022"

// The kubelet's Windows path for an ordinary pod: crictl.exe drives
// containerd.exe's own Windows CRI, which makes the pod's network
// namespace through HCN and its network through CNI, and runs the pod on
// the shipped shim.exe, whose HCS backend runs the pause container and the
// app as compute systems, in both sandbox modes. HCS and HCN are the
// stand-ins' (docs/test-node.md): the containers are real Windows
// processes in a job object each, their C:\ their volume's directory.
func TestCRIPod(t *testing.T) {
	for _, sandboxer := range []string{"shim", "podsandbox"} {
		t.Run(sandboxer, func(t *testing.T) { criPod(t, sandboxer) })
	}
}

func criPod(t *testing.T, sandboxer string) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: sandboxer, DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	logs := t.TempDir()
	port, hostPort := freePort(t), freePort(t)
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "web", "namespace": "default", "uid": "uid-web"},
		"hostname":      "web",
		"log_directory": WindowsPath(logs),
		"port_mappings": []map[string]any{{"container_port": port, "host_port": hostPort}},
	})
	id := criRun(t, n, "runp", pod)
	var podStatus struct {
		Status struct {
			State   string `json:"state"`
			Network struct {
				IP string `json:"ip"`
			} `json:"network"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(criRun(t, n, "inspectp", "-o", "json", id)), &podStatus); err != nil || podStatus.Status.State != "SANDBOX_READY" || podStatus.Status.Network.IP != "127.0.0.1" {
		t.Errorf("inspectp: %+v, %v; want ready with the test CNI plugin's address", podStatus, err)
	}
	run := &podRun{t: t, n: n, id: id, logs: logs, program: `C:\winproc-testapp.exe`,
		create: func(name string, extra map[string]any, command ...string) string {
			return criCreatePod(t, n, id, pod, name, extra, command...)
		}}

	data := n.Path(`C:\hostdata\web`)
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "node.txt"), []byte("the node's data"), 0o644); err != nil {
		t.Fatal(err)
	}
	app := run.create("app", map[string]any{
		"envs":        []map[string]string{{"key": "GREETING", "value": "from CRI"}},
		"mounts":      []map[string]any{{"container_path": `C:\data`, "host_path": `C:\hostdata\web`, "readonly": true}},
		"working_dir": `C:\work`,
		"annotations": map[string]string{"io.microsoft.container.processor.count": "1"},
		"windows": map[string]any{
			"resources":        map[string]any{"memory_limit_in_bytes": 512 << 20},
			"security_context": map[string]any{"run_as_username": "ContainerUser"},
		},
	}, `C:\winproc-testapp.exe`, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port))
	criRun(t, n, "start", app)
	waitFor(t, "the app's log", func() bool { return strings.Contains(containerLog(n, app), "listening") })
	if out := criRun(t, n, "ps", "-q", "--pod", id); out != app {
		t.Errorf("crictl ps --pod: %q, want %s", out, app)
	}
	if out := criRun(t, n, "inspect", "-o", "json", app); !strings.Contains(out, `"CONTAINER_RUNNING"`) {
		t.Errorf("inspect:\n%s", out)
	}
	env := criRun(t, n, "exec", "-s", app, `C:\winproc-testapp.exe`, "env")
	if envValue(env, "GREETING") != "from CRI" || !strings.HasSuffix(envValue(env, "cwd"), `\standin-volume\work`) || envValue(env, "GOFLAGS") != "" {
		t.Errorf("exec env: GREETING %q, cwd %q, the host's GOFLAGS %q; want CRI's, C:\\work in the container's C:\\ and not the host's:\n%s", envValue(env, "GREETING"), envValue(env, "cwd"), envValue(env, "GOFLAGS"), env)
	}
	if out := criRun(t, n, "exec", "-s", app, "cmd", "/c", "type", `C:\data\node.txt`); !strings.Contains(out, "the node's data") {
		t.Errorf("the mount C:\\data in the container: %q", out)
	}
	// Wine has no users: the user is checked where it reaches HCS.
	if docs := n.standinDocuments(app); !strings.Contains(docs, `"User":"ContainerUser"`) {
		t.Errorf("the app's processes' HCS documents have no user ContainerUser:\n%s", docs)
	}
	if _, _, err := n.Crictl("exec", "-s", app, `C:\winproc-testapp.exe`, "exit", "3"); err == nil {
		t.Error("exec exiting 3 succeeded")
	}
	// port-forward, containerd 2.x's way: containerd.exe dials the pod's
	// IP, the test CNI plugin's.
	run.forward(port)
	// The pod's host port, mapped by its CNI plugin as on Windows.
	if body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", hostPort)); err != nil || body != "ok" {
		t.Errorf("the pod's host port %d: %q, %v", hostPort, body, err)
	}
	run.streams(app)

	checkContainerStats(t, n, app)
	run.podStats(sandboxer)
	criRun(t, n, "update", "--memory", "268435456", app)
	run.resize(app, true)

	run.stopGracefully(app)
	if !strings.Contains(containerLog(n, app), "GET /healthz") {
		t.Errorf("the app's log has no forwarded request:\n%s", containerLog(n, app))
	}
	stubborn := run.stopAtDeadline()
	criRun(t, n, "rm", app, stubborn)
	criRun(t, n, "stopp", id)
	criRun(t, n, "rmp", id)
	n.checkNothingLeft()
	if pids := n.Processes("winproc-test.exe"); len(pids) != 0 {
		t.Errorf("the pod's port forwarder outlived it: %v", pids)
	}
	if b, err := os.ReadFile(filepath.Join(data, "node.txt")); err != nil || string(b) != "the node's data" {
		t.Errorf("the mount's host directory after the pod: %q, %v", b, err)
	}
}

// criCreatePod creates a process-isolated container name in pod.
func criCreatePod(t *testing.T, n *Node, pod, podConfig, name string, extra map[string]any, command ...string) string {
	t.Helper()
	return criCreateContainer(t, n, pod, podConfig, map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": appImage},
		"command":  command,
		"log_path": name + ".log",
	}, extra)
}

// checkContainerStats checks that crictl stats gives container c's
// statistics as containerd.exe decodes the shim's: taken now, with CPU
// and memory.
func checkContainerStats(t *testing.T, n *Node, c string) {
	t.Helper()
	var v struct {
		Stats []struct {
			CPU struct {
				Timestamp string `json:"timestamp"`
			} `json:"cpu"`
			Memory *struct {
				Timestamp string `json:"timestamp"`
			} `json:"memory"`
		} `json:"stats"`
	}
	out := criRun(t, n, "stats", "-o", "json", "--id", c)
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Stats) != 1 {
		t.Fatalf("crictl stats: %v\n%s", err, out)
	}
	var ts int64
	fmt.Sscan(v.Stats[0].CPU.Timestamp, &ts)
	if d := time.Since(time.Unix(0, ts)); d < 0 || d > time.Minute || v.Stats[0].Memory == nil {
		t.Errorf("crictl stats of %s: CPU taken %v ago, memory %v\n%s", c, d, v.Stats[0].Memory, out)
	}
}

// standinDocuments are the documents the HCS stand-in was given for
// compute system id and its processes, joined.
func (n *Node) standinDocuments(id string) string {
	files, _ := filepath.Glob(filepath.Join(n.Path(`C:\ProgramData\winproc-standins\documents`), id+"*.json"))
	var docs []string
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			docs = append(docs, string(b))
		}
	}
	return strings.Join(docs, "\n")
}
