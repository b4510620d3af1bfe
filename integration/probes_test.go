//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/winproc/winproc/integration/node"
)

// Kubelet exec probes run every few seconds for the life of a pod: each
// exec through the real shim must give back every file descriptor and
// thread it took.
func TestExecProbesLeaveNoHandles(t *testing.T) {
	n := node.Start(t, bins)
	importTestApp(t, n)
	client := newClient(t, n)

	task, out := startTestApp(t, n, client, "probed", "sleep", "-seconds", "0")
	out.waitFor(t, "ready")
	shims := n.Shims()
	if len(shims) != 1 {
		t.Fatalf("shims: %v, want 1", shims)
	}
	shim := shims[0]
	probe := func(i int) {
		t.Helper()
		execProbe(t, task, fmt.Sprintf("probe-%d", i))
	}
	// Warm up: the first execs make lasting state (the Wine server's
	// connections, the reaper).
	for i := 0; i < 3; i++ {
		probe(i)
	}
	fds, threads := countFDs(t, shim), countThreads(t, shim)
	const probes = 25
	for i := 3; i < 3+probes; i++ {
		probe(i)
	}
	// A leak grows with the probes; an exec's last descriptors may take a
	// moment to close, and the Go runtime keeps a few extra threads after
	// bursts of blocking calls. So: let descriptors settle, then allow a
	// small constant, far below one per probe.
	after := countFDs(t, shim)
	for deadline := time.Now().Add(3 * time.Second); after > fds && time.Now().Before(deadline); after = countFDs(t, shim) {
		time.Sleep(100 * time.Millisecond)
	}
	if after > fds+3 {
		t.Errorf("shim file descriptors grew from %d to %d over %d exec probes", fds, after, probes)
	}
	if after := countThreads(t, shim); after > threads+probes/3 {
		t.Errorf("shim threads grew from %d to %d over %d exec probes", threads, after, probes)
	}
	t.Logf("after %d probes: %d file descriptors, %d threads", probes, countFDs(t, shim), countThreads(t, shim))
}

// execProbe runs what a kubelet exec probe runs in task, `winproc-testapp
// exit 0` without stdin, and requires exit status 0.
func execProbe(t testing.TB, task containerd.Task, id string) {
	t.Helper()
	ctx := context.Background()
	spec, err := task.Spec(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := *spec.Process
	p.Args = []string{testApp, "exit", "0"}
	out := &output{}
	exec, err := task.Exec(ctx, id, &p, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	done, err := exec.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if st := waitStatus(t, done); st.ExitCode() != 0 {
		t.Fatalf("probe %s exit code %d: %s", id, st.ExitCode(), out.String())
	}
	if _, err := exec.Delete(ctx); err != nil {
		t.Fatal(err)
	}
}

func countFDs(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func countThreads(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}
