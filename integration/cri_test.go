//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// containerConfig writes a CRI container config for crictl: image running
// args, with an environment variable.
func containerConfig(t *testing.T, name, image string, args []string) string {
	t.Helper()
	cfg := map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": image},
		"command":  args,
		"envs":     []map[string]string{{"key": "GREETING", "value": "from CRI"}},
		"log_path": name + ".log",
	}
	return writeJSON(t, name+".json", cfg)
}

// crictl runs crictl and fails the test if it fails; it returns the last
// line of its output.
func crictl(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	out, err := n.Crictl(context.Background(), args...)
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// A container of a winproc pod through CRI alone, as the kubelet drives
// it: crictl create, start, logs, exec, stats, stop (the app handles its
// console event and exits 0) and rm, with containerd's CRI making the
// Windows spec (containerd-wincri).
func TestCRIContainerLifecycle(t *testing.T) {
	n := node.Start(t, bins)
	importPauseImage(t, n, node.HostBuild+".1", false)
	importTestApp(t, n)
	pod := runPod(t, n, "cri")
	port := freePort(t)

	ctr := lastLine(crictl(t, n, "create", pod,
		containerConfig(t, "app", testAppImage, []string{testApp, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", port)}),
		podConfig(t, "cri")))
	crictl(t, n, "start", ctr)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(crictl(t, n, "logs", ctr), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("the app never said it listens; its log:\n%s", crictl(t, n, "logs", ctr))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", port)); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("the app answered %q", body)
	}
	if out := crictl(t, n, "exec", "-s", ctr, testApp, "env"); !strings.Contains(out, "GREETING=from CRI") {
		t.Errorf("exec env in the container:\n%s", out)
	}
	if out := crictl(t, n, "ps", "-o", "json"); !strings.Contains(out, ctr) || !strings.Contains(out, "CONTAINER_RUNNING") {
		t.Errorf("ps does not show the container running:\n%s", out)
	}
	crictl(t, n, "stats", ctr)

	// exec -i: every byte of stdin through CRI's streaming server and back.
	payload := strings.Repeat("winproc through CRI\n", 5000)
	execCmd := n.CrictlCommand(context.Background(), "exec", "-i", ctr, testApp, "echo")
	execCmd.Stdin = strings.NewReader(payload)
	if out, err := execCmd.Output(); err != nil || string(out) != payload {
		t.Errorf("exec -i echo: %v; %d of %d bytes back", err, len(out), len(payload))
	}

	// port-forward: containerd's streaming server reaches the app.
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	forward := n.CrictlCommand(ctx, "port-forward", pod, fmt.Sprintf("%d:%d", local, port))
	forwarding := &output{}
	forward.Stdout, forward.Stderr = forwarding, forwarding
	if err := forward.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); forward.Wait() })
	forwarding.waitFor(t, "Forwarding from")
	if body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", local)); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("through port-forward the app answered %q", body)
	}
	cancel()

	crictl(t, n, "stop", "-t", "10", ctr)
	var st struct {
		Status struct {
			State    string `json:"state"`
			ExitCode int    `json:"exitCode"`
		} `json:"status"`
	}
	out := crictl(t, n, "inspect", "-o", "json", ctr)
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); err != nil {
		t.Fatalf("inspect: %v\n%s", err, out)
	}
	if st.Status.State != "CONTAINER_EXITED" || st.Status.ExitCode != 0 {
		t.Errorf("after stop: %s, exit code %d; want CONTAINER_EXITED and 0 (the app handles its console event)", st.Status.State, st.Status.ExitCode)
	}
	crictl(t, n, "rm", ctr)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	requireNoPodLeft(t, n, pod)
}
