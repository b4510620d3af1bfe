//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/console"

	"github.com/winproc/winproc/integration/node"
)

// containerConfig writes a CRI container config for crictl: image running
// args, with an environment variable and what extra adds or replaces.
func containerConfig(t *testing.T, name, image string, args []string, extra map[string]any) string {
	t.Helper()
	cfg := map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": image},
		"command":  args,
		"envs":     []map[string]string{{"key": "GREETING", "value": "from CRI"}},
		"log_path": name + ".log",
	}
	maps.Copy(cfg, extra)
	return writeJSON(t, name+".json", cfg)
}

// crictl runs crictl and fails the test if it fails; it returns its output.
func crictl(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	out, err := n.Crictl(context.Background(), args...)
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// crictlJSON runs crictl with args and decodes the JSON it prints into v.
func crictlJSON(t *testing.T, n *node.Node, v any, args ...string) {
	t.Helper()
	out := crictl(t, n, args...)
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), v); err != nil {
		t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// inspected is what the tests read of `crictl inspect -o json`.
type inspected struct {
	Status struct {
		State    string `json:"state"`
		ExitCode int    `json:"exitCode"`
		LogPath  string `json:"logPath"`
		Mounts   []struct {
			ContainerPath string `json:"containerPath"`
			HostPath      string `json:"hostPath"`
			Readonly      bool   `json:"readonly"`
		} `json:"mounts"`
	} `json:"status"`
	Info struct {
		RuntimeSpec struct {
			Process struct {
				User struct {
					Username string `json:"username"`
				} `json:"user"`
				Cwd string `json:"cwd"`
			} `json:"process"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

func inspect(t *testing.T, n *node.Node, id string) inspected {
	t.Helper()
	var st inspected
	crictlJSON(t, n, &st, "inspect", "-o", "json", id)
	return st
}

// waitLog waits until the container's log, through crictl, holds want.
func waitLog(t *testing.T, n *node.Node, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(crictl(t, n, "logs", id), want) {
		if time.Now().After(deadline) {
			t.Fatalf("container %s never logged %q; its log:\n%s", id, want, crictl(t, n, "logs", id))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// A container of a winproc pod through CRI alone, as the kubelet drives
// it, with containerd's CRI making the Windows spec (containerd-wincri):
// create with host-directory mounts, environment, working directory, user,
// resources and an io.microsoft annotation; start, ps, inspect, logs and
// their rotation, exec (-s, -i, -it), stats, statsp, port-forward, stop
// (the app handles its console event and exits 0) and rm.
func TestCRIContainerLifecycle(t *testing.T) {
	forEachSandboxer(t, criContainerLifecycle)
}

func criContainerLifecycle(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	pod := runPod(t, n, "cri")
	port := freePort(t)

	roDir, rwDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(roDir, "in.txt"), []byte("read-only data\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const memLimit = 256 << 20
	ctr := lastLine(crictl(t, n, "create", pod,
		containerConfig(t, "app", testAppImage, []string{testApp, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port)}, map[string]any{
			"mounts": []map[string]any{
				{"container_path": `C:\ro`, "host_path": roDir, "readonly": true},
				{"container_path": `C:\rw`, "host_path": rwDir},
			},
			"working_dir": `C:\rw`,
			"windows": map[string]any{
				"security_context": map[string]any{"run_as_username": "ContainerUser"},
				"resources":        map[string]any{"cpu_maximum": 5000, "memory_limit_in_bytes": memLimit},
			},
			// runhcs's processor limit annotation wins over the spec.
			"annotations": map[string]string{"io.microsoft.container.processor.limit": "2500"},
		}),
		podConfig(t, "cri")))
	crictl(t, n, "start", ctr)
	waitLog(t, n, ctr, "listening on")
	if body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("the app answered %q", body)
	}
	if out := crictl(t, n, "ps", "-o", "json"); !strings.Contains(out, ctr) || !strings.Contains(out, "CONTAINER_RUNNING") {
		t.Errorf("ps does not show the container running:\n%s", out)
	}

	st := inspect(t, n, ctr)
	if st.Status.State != "CONTAINER_RUNNING" || len(st.Status.Mounts) != 2 || !st.Status.Mounts[0].Readonly || st.Status.Mounts[1].Readonly {
		t.Errorf("inspect: state %s, mounts %+v", st.Status.State, st.Status.Mounts)
	}
	if u := st.Info.RuntimeSpec.Process.User.Username; u != "ContainerUser" {
		t.Errorf("the spec's user is %q, want ContainerUser", u)
	}
	checkSiloSettings(t, n, ctr, memLimit)
	checkExecs(t, n, ctr, roDir, rwDir)

	var stats struct {
		Stats []struct {
			WritableLayer struct {
				FsID      struct{ Mountpoint string } `json:"fsId"`
				UsedBytes struct{ Value json.Number }
			}
		}
	}
	crictlJSON(t, n, &stats, "stats", "-o", "json", ctr)
	if len(stats.Stats) != 1 || stats.Stats[0].WritableLayer.FsID.Mountpoint != n.SnapshotterRoot {
		t.Errorf("stats: %+v; want the container's writable layer on %s", stats.Stats, n.SnapshotterRoot)
	}
	checkPodStats(t, n, pod, ctr)
	checkRuntimeAndImages(t, n)

	// port-forward: containerd's streaming server reaches the app.
	if body := getThroughPortForward(t, n, pod, port); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("through port-forward the app answered %q", body)
	}

	checkLogRotation(t, n, ctr, port, st.Status.LogPath)

	crictl(t, n, "stop", "-t", "10", ctr)
	if st := inspect(t, n, ctr); st.Status.State != "CONTAINER_EXITED" || st.Status.ExitCode != 0 {
		t.Errorf("after stop: %s, exit code %d; want CONTAINER_EXITED and 0 (the app handles its console event)", st.Status.State, st.Status.ExitCode)
	}
	crictl(t, n, "rm", ctr)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	requireNoPodLeft(t, n, pod)
}

// checkSiloSettings checks what the shim made of container ctr's spec: the
// compute system's resources and mapped directories.
func checkSiloSettings(t *testing.T, n *node.Node, ctr string, memLimit uint64) {
	t.Helper()
	var silo struct {
		Resources struct {
			CPUMaximum       uint16
			MemoryLimitBytes uint64
		}
		MappedDirectories []struct {
			HostPath, ContainerPath string
			ReadOnly                bool
		}
	}
	readJSON(t, filepath.Join(n.EmulationRoot(), ctr, "state.json"), &silo)
	if silo.Resources.CPUMaximum != 2500 || silo.Resources.MemoryLimitBytes != memLimit {
		t.Errorf("the compute system's resources are %+v; want CPU maximum 2500 (the annotation) and memory %d", silo.Resources, memLimit)
	}
	if len(silo.MappedDirectories) != 2 {
		t.Errorf("the compute system maps %+v", silo.MappedDirectories)
	}
}

// checkExecs execs into container ctr through CRI: with -s its environment,
// working directory and mounts (roDir read-only, rwDir read-write); with -i
// every byte of stdin through the streaming server and back; with -it a
// terminal of its own.
func checkExecs(t *testing.T, n *node.Node, ctr, roDir, rwDir string) {
	t.Helper()
	if out := crictl(t, n, "exec", "-s", ctr, testApp, "env"); !strings.Contains(out, "GREETING=from CRI") || !strings.Contains(out, `cwd=C:\rw`) {
		t.Errorf("exec env in the container:\n%s", out)
	}
	if out := crictl(t, n, "exec", "-s", ctr, "cmd", "/c", `type C:\ro\in.txt`); !strings.Contains(out, "read-only data") {
		t.Errorf("reading the read-only mount: %q", out)
	}
	crictl(t, n, "exec", "-s", ctr, "cmd", "/c", `echo written>C:\rw\out.txt`)
	if b, err := os.ReadFile(filepath.Join(rwDir, "out.txt")); err != nil || !strings.Contains(string(b), "written") {
		t.Errorf("a write to the read-write mount reached the host as %q, %v", b, err)
	}
	// Wine's cmd reports the failed redirection, but exits 0.
	if out := crictl(t, n, "exec", "-s", ctr, "cmd", "/c", `echo no>C:\ro\out.txt`); !strings.Contains(out, "denied") {
		t.Errorf("a write to the read-only mount: %q, want access denied", out)
	}
	if _, err := os.Stat(filepath.Join(roDir, "out.txt")); err == nil {
		t.Error("a write to the read-only mount reached the host")
	}

	// exec -i: every byte of stdin through CRI's streaming server and back.
	payload := strings.Repeat("winproc through CRI\n", 5000)
	execCmd := n.CrictlCommand(context.Background(), "exec", "-i", ctr, testApp, "echo")
	execCmd.Stdin = strings.NewReader(payload)
	if out, err := execCmd.Output(); err != nil || string(out) != payload {
		t.Errorf("exec -i echo: %v; %d of %d bytes back", err, len(out), len(payload))
	}

	// exec -it: a terminal of its own (crictl insists on one).
	if out := crictlTerminal(t, n, "exec", "-it", ctr, testApp, "env"); !strings.Contains(out, "GREETING=from CRI") {
		t.Errorf("exec -it env:\n%q", out)
	}
}

// checkLogRotation rotates container ctr's log as the kubelet does: rename,
// then ReopenContainerLog; the app at port logs a request before and after.
func checkLogRotation(t *testing.T, n *node.Node, ctr string, port int, logPath string) {
	t.Helper()
	get(t, fmt.Sprintf("http://127.0.0.1:%d/before-rotation", port))
	waitLog(t, n, ctr, "/before-rotation")
	rotated := logPath + ".1"
	if err := os.Rename(logPath, rotated); err != nil {
		t.Fatal(err)
	}
	crictl(t, n, "logs", "--reopen", ctr)
	get(t, fmt.Sprintf("http://127.0.0.1:%d/after-rotation", port))
	waitLog(t, n, ctr, "/after-rotation")
	if old, err := os.ReadFile(rotated); err != nil || !bytes.Contains(old, []byte("/before-rotation")) || bytes.Contains(old, []byte("/after-rotation")) {
		t.Errorf("the rotated log (%v):\n%s", err, old)
	}
	if cur, err := os.ReadFile(logPath); err != nil || bytes.Contains(cur, []byte("/before-rotation")) {
		t.Errorf("the reopened log (%v):\n%s", err, cur)
	}
}

// attach to a container's own stdin and stdout, and stop of a container
// that ignores its console event: crictl stop waits out the grace period,
// then the container is killed.
func TestCRIAttachAndStopAtDeadline(t *testing.T) {
	forEachSandboxer(t, criAttachAndStopAtDeadline)
}

func criAttachAndStopAtDeadline(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	pod := runPod(t, n, "attach")
	podCfg := podConfig(t, "attach")

	// stdin_once: the container's stdin closes when the attach's does, so
	// echo ends once it has copied every byte back.
	echo := lastLine(crictl(t, n, "create", pod,
		containerConfig(t, "echo", testAppImage, []string{testApp, "echo"}, map[string]any{"stdin": true, "stdin_once": true}), podCfg))
	crictl(t, n, "start", echo)
	payload := strings.Repeat("attached through CRI\n", 2000)
	attach := n.CrictlCommand(context.Background(), "attach", "-i", echo)
	attach.Stdin = strings.NewReader(payload)
	if out, err := attach.Output(); err != nil || string(out) != payload {
		t.Errorf("attach -i: %v; %d of %d bytes back", err, len(out), len(payload))
	}
	if code := waitExited(t, n, echo); code != 0 {
		t.Errorf("echo exited with %d after its stdin closed", code)
	}
	if out := crictl(t, n, "logs", echo); out != payload {
		t.Errorf("the log holds %d bytes, want the %d attached", len(out), len(payload))
	}

	stubborn := lastLine(crictl(t, n, "create", pod,
		containerConfig(t, "stubborn", testAppImage, []string{testApp, "sleep", "-seconds", "0", "-ignore-events"}, nil), podCfg))
	crictl(t, n, "start", stubborn)
	waitLog(t, n, stubborn, "ready")
	// crictl events: the container events a kubelet's evented PLEG reads.
	ectx, ecancel := context.WithCancel(context.Background())
	events := n.CrictlCommand(ectx, "events", "-o", "json")
	eventLog := &output{}
	events.Stdout, events.Stderr = eventLog, eventLog
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ecancel(); events.Wait() })
	const grace = 3 * time.Second
	begin := time.Now()
	crictl(t, n, "stop", "-t", fmt.Sprint(grace.Seconds()), stubborn)
	took := time.Since(begin)
	// Killed at the deadline, and its end reported at once.
	if took < grace || took > grace+1500*time.Millisecond {
		t.Errorf("stop returned after %v; want just after the %v grace period", took, grace)
	}
	if st := inspect(t, n, stubborn); st.Status.State != "CONTAINER_EXITED" || st.Status.ExitCode == 0 {
		t.Errorf("after stop: %s, exit code %d; want CONTAINER_EXITED, killed", st.Status.State, st.Status.ExitCode)
	}
	if out := crictl(t, n, "logs", stubborn); !strings.Contains(out, "got CTRL_") {
		t.Errorf("the app never saw its console event; its log:\n%s", out)
	}
	t.Logf("stop -t %v took %v", grace.Seconds(), took.Round(time.Millisecond))
	eventLog.waitFor(t, "CONTAINER_STOPPED_EVENT")
	if !strings.Contains(eventLog.String(), stubborn) {
		t.Errorf("the events do not name the stopped container:\n%s", eventLog.String())
	}
	ecancel()
	crictl(t, n, "rm", echo, stubborn)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	requireNoPodLeft(t, n, pod)
}

// forEachSandboxer runs test in a subtest per sandboxer of the winproc
// handler: "shim" (the shim owns the pod through the sandbox API) and
// "podsandbox" (containerd runs the pause container as a task).
func forEachSandboxer(t *testing.T, test func(t *testing.T, sandboxer string)) {
	for _, sandboxer := range []string{"shim", "podsandbox"} {
		t.Run(sandboxer, func(t *testing.T) { test(t, sandboxer) })
	}
}

// checkRuntimeAndImages checks what the kubelet reads of the runtime and
// its images: version, info (the runtime and the pod network ready),
// imagefsinfo, images, inspecti and rmi.
func checkRuntimeAndImages(t *testing.T, n *node.Node) {
	t.Helper()
	if out := crictl(t, n, "version"); !strings.Contains(out, "RuntimeName:  containerd") || !strings.Contains(out, "RuntimeApiVersion:  v1") {
		t.Errorf("version:\n%s", out)
	}
	var info struct {
		Status struct {
			Conditions []struct {
				Type   string
				Status bool
			}
		}
	}
	crictlJSON(t, n, &info, "info", "-o", "json")
	ready := map[string]bool{}
	for _, c := range info.Status.Conditions {
		ready[c.Type] = c.Status
	}
	if !ready["RuntimeReady"] || !ready["NetworkReady"] {
		t.Errorf("info: conditions %+v, want RuntimeReady and NetworkReady (the node's CNI)", info.Status.Conditions)
	}
	// The kubelet reads the first image file system: the snapshotter's,
	// with the layers' usage (containerd measures it every 10 s).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var fs struct {
			Status struct {
				ImageFilesystems []struct {
					FsID      struct{ Mountpoint string } `json:"fsId"`
					UsedBytes struct{ Value json.Number }
				}
			}
		}
		crictlJSON(t, n, &fs, "imagefsinfo", "-o", "json")
		if len(fs.Status.ImageFilesystems) == 0 {
			t.Fatal("imagefsinfo lists no image file system")
		}
		first := fs.Status.ImageFilesystems[0]
		used, _ := first.UsedBytes.Value.Int64()
		if first.FsID.Mountpoint == n.SnapshotterRoot && used > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("imagefsinfo: the first image file system is %s with %d bytes used; want winproc-snapshotter's root %s, in use", first.FsID.Mountpoint, used, n.SnapshotterRoot)
			break
		}
	}
	var image struct {
		Info struct {
			ImageSpec struct{ OS string }
		}
	}
	if crictlJSON(t, n, &image, "inspecti", "-o", "json", testAppImage); image.Info.ImageSpec.OS != "windows" {
		t.Errorf("inspecti: the test app's image is for %q", image.Info.ImageSpec.OS)
	}
	const spare = "example.com/winproc/spare:test"
	importTestAppAs(t, n, spare, node.HostBuild+".1")
	if out := crictl(t, n, "images"); !strings.Contains(out, "example.com/winproc/spare") || !strings.Contains(out, "example.com/winproc/testapp") {
		t.Errorf("images:\n%s", out)
	}
	crictl(t, n, "rmi", spare)
	if out := crictl(t, n, "images"); strings.Contains(out, "example.com/winproc/spare") {
		t.Errorf("after rmi, images:\n%s", out)
	}
}

// getThroughPortForward runs `crictl port-forward` from a free local port
// to the pod's port, GETs / through it and returns the body.
func getThroughPortForward(t *testing.T, n *node.Node, pod string, port int) string {
	t.Helper()
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	forward := n.CrictlCommand(ctx, "port-forward", pod, fmt.Sprintf("%d:%d", local, port))
	forwarding := &output{}
	forward.Stdout, forward.Stderr = forwarding, forwarding
	if err := forward.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	defer func() { cancel(); forward.Wait() }()
	forwarding.waitFor(t, "Forwarding from")
	return get(t, fmt.Sprintf("http://127.0.0.1:%d/", local))
}

// waitExited waits until CRI reports the container exited and returns its
// exit code.
func waitExited(t *testing.T, n *node.Node, id string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := inspect(t, n, id)
		if st.Status.State == "CONTAINER_EXITED" {
			return st.Status.ExitCode
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s is still %s", id, st.Status.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkPodStats checks crictl statsp: the pod's CPU and memory as Windows
// stats, with its container among them.
func checkPodStats(t *testing.T, n *node.Node, pod, ctr string) {
	t.Helper()
	var stats struct {
		Stats []struct {
			Attributes struct{ ID string }
			Windows    *struct {
				CPU struct {
					UsageCoreNanoSeconds struct{ Value json.Number }
				}
				Memory struct {
					WorkingSetBytes struct{ Value json.Number }
				}
				Containers []struct {
					Attributes struct{ ID string }
				}
			}
		}
	}
	crictlJSON(t, n, &stats, "statsp", "-o", "json", "--id", pod)
	if len(stats.Stats) != 1 || stats.Stats[0].Windows == nil {
		t.Fatalf("statsp: %+v", stats)
	}
	w := stats.Stats[0].Windows
	cpu, _ := w.CPU.UsageCoreNanoSeconds.Value.Int64()
	mem, _ := w.Memory.WorkingSetBytes.Value.Int64()
	if cpu <= 0 || mem <= 0 || len(w.Containers) != 1 || w.Containers[0].Attributes.ID != ctr {
		t.Errorf("statsp: CPU %d ns, working set %d bytes, containers %+v", cpu, mem, w.Containers)
	}
}

// crictlTerminal runs crictl with a pseudo terminal as its stdin, stdout
// and stderr, and returns what it wrote there.
func crictlTerminal(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	pty, slavePath, err := console.NewPty()
	if err != nil {
		t.Fatal(err)
	}
	defer pty.Close()
	slave, err := os.OpenFile(slavePath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.CrictlCommand(context.Background(), args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if err := cmd.Start(); err != nil {
		slave.Close()
		t.Fatal(err)
	}
	slave.Close()
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&out, pty) // ends with EIO once crictl has gone
	}()
	if err := cmd.Wait(); err != nil {
		t.Errorf("crictl %s: %v", strings.Join(args, " "), err)
	}
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Error("the terminal did not close after crictl exited")
	}
	return out.String()
}
