//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/cio"

	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/procscan"
)

// servingPod is a pod of the winproc handler with the test app serving
// HTTP in it, as the soak and fault runs make them by the dozen.
type servingPod struct {
	id, name string
	port     int
	c        containerd.Container
	task     containerd.Task
	out      *output
	// runp and start are how long crictl runp and the container's start
	// (create, start, listening) took.
	runp, start time.Duration
}

// startServingPod runs pod name through crictl and starts the test app
// serving on a free port in it, through containerd with the pod as its
// sandbox (the container verbs of CRI need a containerd built with the
// Windows rules). The caller removes it (stopServingPod).
func startServingPod(t *testing.T, n *node.Node, client *containerd.Client, name string) *servingPod {
	t.Helper()
	ctx := context.Background()
	p := &servingPod{name: name, port: freePort(t), out: &output{}}
	begin := time.Now()
	out, err := n.Crictl(ctx, "runp", "--runtime", "winproc", podConfig(t, name))
	if err != nil {
		t.Fatalf("runp %s: %v", name, err)
	}
	p.runp = time.Since(begin)
	p.id = lastLine(out)

	begin = time.Now()
	p.c = newContainer(t, n, client, testAppImage, name+"-app", podMember{pod: p.id, kind: "container", shimSandbox: true},
		[]string{testApp, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", p.port)})
	p.task, err = p.c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, p.out, p.out), cio.WithFIFODir(t.TempDir())))
	if err != nil {
		t.Fatalf("create the app of %s: %v", name, err)
	}
	if err := p.task.Start(ctx); err != nil {
		t.Fatalf("start the app of %s: %v", name, err)
	}
	p.out.waitFor(t, "listening on")
	p.start = time.Since(begin)
	return p
}

// wait returns the app's exit. A wait does not outlive a containerd
// restart: ask for it when the exit is near.
func (p *servingPod) wait(t *testing.T) <-chan containerd.ExitStatus {
	t.Helper()
	ch, err := p.task.Wait(context.Background())
	if err != nil {
		t.Fatalf("wait for the app of %s: %v", p.name, err)
	}
	return ch
}

// serves checks that the pod's app answers HTTP.
func (p *servingPod) serves(t *testing.T) {
	t.Helper()
	if body := get(t, fmt.Sprintf("http://127.0.0.1:%d/", p.port)); !strings.Contains(body, "hello from winproc-testapp") {
		t.Errorf("pod %s answered %q", p.name, body)
	}
}

// stopServingPod stops the app gracefully (it must exit 0), removes it,
// and stops and removes the pod through crictl.
func stopServingPod(t *testing.T, n *node.Node, p *servingPod) {
	t.Helper()
	ctx := context.Background()
	exited := p.wait(t)
	if err := p.task.Kill(ctx, syscall.SIGTERM); err != nil {
		t.Errorf("stop the app of %s: %v", p.name, err)
	}
	if st := waitStatus(t, exited); st.ExitCode() != 0 {
		t.Errorf("app of %s exited %d after SIGTERM, want 0; its output:\n%s", p.name, st.ExitCode(), p.out.String())
	}
	if _, err := p.task.Delete(ctx); err != nil {
		t.Errorf("delete the app's task of %s: %v", p.name, err)
	}
	if err := p.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
		t.Errorf("delete the app of %s: %v", p.name, err)
	}
	for _, verb := range []string{"stopp", "rmp"} {
		if _, err := n.Crictl(ctx, verb, p.id); err != nil {
			t.Errorf("%s %s: %v", verb, p.name, err)
		}
	}
}

// nodeUsage is what the soak watches of the node's daemons.
type nodeUsage struct {
	containerdRSS, snapshotterRSS uint64
	containerdFDs, snapshotterFDs int
}

func readNodeUsage(t *testing.T, n *node.Node) nodeUsage {
	t.Helper()
	var u nodeUsage
	if m, err := node.ProcessMemory(n.ContainerdPID()); err == nil {
		u.containerdRSS = m.RSS
	}
	if m, err := node.ProcessMemory(n.SnapshotterPID()); err == nil {
		u.snapshotterRSS = m.RSS
	}
	u.containerdFDs, u.snapshotterFDs = countFDs(t, n.ContainerdPID()), countFDs(t, n.SnapshotterPID())
	return u
}

// requireNodeClean fails unless the node is back to holding only its
// images: no shim, Wine process, compute system, mount, task or sandbox
// state directory, pod snapshot or lease. imageSnapshots is how many
// snapshots the images hold.
func requireNodeClean(t *testing.T, n *node.Node, imageSnapshots int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for len(n.Shims()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if shims := n.Shims(); len(shims) > 0 {
		t.Errorf("shims left: %v", shims)
	}
	if wine := procscan.Live(func(_ int, _, environ []byte) bool {
		return strings.Contains(string(environ), "WINEPREFIX="+n.Dir+"/")
	}); len(wine) > 0 {
		t.Errorf("Wine processes left: %v", wine)
	}
	for _, m := range emulatednode.Mounts(n.Dir) {
		if m != n.SnapshotterRoot {
			t.Errorf("mount left: %s", m)
		}
	}
	for _, dir := range []string{
		n.EmulationRoot(),
		// Every task's and every pod's state directory lives here.
		n.Bundle(""),
		n.SandboxBundle(""),
	} {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("state left in %s: %v", dir, names)
		}
	}
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if snaps := ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"); len(snaps) != imageSnapshots {
		t.Errorf("%d snapshots, want the images' %d:\n%s", len(snaps), imageSnapshots, strings.Join(snaps, "\n"))
	}
	if leases := ctrRows(t, n, "leases", "ls"); len(leases) > 0 {
		t.Errorf("leases left: %q", leases)
	}
}

// ctrRows runs a ctr listing and returns its rows, without the header and
// without ctr's own log lines (a deprecation warning on cgroup v1 hosts).
func ctrRows(t *testing.T, n *node.Node, args ...string) []string {
	t.Helper()
	out, err := n.Ctr(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "KEY" && f[0] != "ID" && !strings.HasPrefix(f[0], "time=") {
			rows = append(rows, line)
		}
	}
	return rows
}

// durations summarises a run's latencies.
type durations []time.Duration

func (d durations) pct(p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// requireFlat fails unless what's p50 over the last runs is at most factor
// times its p50 over the first.
func requireFlat(t *testing.T, factor float64, what string, first, last durations) {
	t.Helper()
	if f, l := first.pct(50), last.pct(50); float64(l) > factor*float64(f) {
		t.Errorf("%s p50 of the last %d is %v, over %.1fx the first %d's %v", what, len(last), l, factor, len(first), f)
	}
}

// envInt reads a positive whole number from the environment, def if unset.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}
