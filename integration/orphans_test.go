//go:build linux

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/doctor"
	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/shim/emulation"
)

// OrphanPodsEnv sets how many serving pods TestOrphans crashes; 3 when
// unset.
const OrphanPodsEnv = "ORPHAN_PODS"

// After a crash, containerd and every shim SIGKILLed with pods serving,
// `winproc doctor` lists every pod's compute systems (and a HostProcess
// pod's container and the host prefix it runs in) as orphans and
// `winproc doctor -fix` removes them: no mount, cgroup, Wine process or
// system directory of winproc's is left. Once with containerd's state
// kept (containerd, started again, then removes the pods, and the fix
// leaves a pod a live shim serves alone), once with it
// wiped (containerd's bundles, sockets and network namespaces gone; the
// emulation's records, which hold mounts, stay).
func TestOrphans(t *testing.T) {
	count := envInt(t, OrphanPodsEnv, 3)
	tools := t.TempDir()
	if err := node.BuildBinaries(tools, "linux", "winproc"); err != nil {
		t.Fatal(err)
	}
	winproc := filepath.Join(tools, "winproc")
	t.Run("StateKept", func(t *testing.T) { crashAndSweep(t, winproc, count, false) })
	t.Run("StateWiped", func(t *testing.T) { crashAndSweep(t, winproc, count, true) })
}

func crashAndSweep(t *testing.T, winproc string, count int, wipe bool) {
	n := node.StartWith(t, bins, node.Options{LogLevel: "info"})
	importPodImages(t, n)
	client := newClient(t, n)
	importHostProcessImage(t, n)
	var pods []*servingPod
	for i := range count {
		pods = append(pods, startServingPod(t, n, client, fmt.Sprintf("orphan-%d", i)))
	}
	// A HostProcess pod: its container and the host prefix it runs in.
	agents := runPodWith(t, n, "agents", hostProcessPodConfig(t))
	agent := createHostProcess(t, n, agents, "agent", `NT AUTHORITY\SYSTEM`, []string{"winproc-testapp.exe", "sleep", "-seconds", "0"})
	crictl(t, n, "start", agent)
	waitLog(t, n, agent, "ready")
	root := n.EmulationRoot()
	systems := dirNames(t, root)
	if len(systems) != 2*count+2 {
		t.Fatalf("compute systems %v, want %d (a pause and an app per pod, the agent and the host prefix)", systems, 2*count+2)
	}
	var cgroups []string
	for _, s := range systems {
		if c := emulation.SiloCgroup(filepath.Join(root, s)); c != "" {
			cgroups = append(cgroups, c)
		}
	}
	wine, mounts := len(n.WineProcesses()), len(emulatednode.Mounts(root))

	n.KillContainerd(t)
	killShims(t, n)
	if wipe {
		wipeContainerdState(t, n)
	}

	r := runDoctor(t, doctorOptions(n))
	requireCheck(t, r, doctor.CheckOrphans, doctor.Fail, fmt.Sprintf("%d compute systems left behind", len(systems)), "winproc doctor -fix")
	if c := r.Check(doctor.CheckOrphans); c != nil {
		details := strings.Join(c.Details, "\n")
		for _, s := range systems {
			want := "/" + s + " (its shim (pid "
			if s == emulation.HostPrefixID {
				want = "/" + s + " (no HostProcess container a running shim serves uses it)"
			}
			if !strings.Contains(details, want) {
				t.Errorf("the orphans check does not list %s as %q:\n%s", s, want, details)
			}
		}
	}

	begin := time.Now()
	fixed := doctorFix(t, n, winproc)
	took := time.Since(begin)
	requireCheck(t, fixed, doctor.CheckOrphans, doctor.OK, fmt.Sprintf("removed %d compute systems", len(systems)))

	if m := emulatednode.Mounts(root); len(m) > 0 {
		t.Errorf("mounts left under %s: %v", root, m)
	}
	if p := n.WineProcesses(); len(p) > 0 {
		t.Errorf("Wine processes of the node left: %v", p)
	}
	if left := dirNames(t, root); len(left) > 0 {
		t.Errorf("system directories left: %v", left)
	}
	for _, c := range cgroups {
		if _, err := os.Stat(c); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("silo cgroup %s left (%v)", c, err)
		}
	}
	requireCheck(t, runDoctor(t, doctorOptions(n)), doctor.CheckOrphans, doctor.OK, "none under")
	t.Logf("%d pods: %d compute systems, %d Wine processes, %d mounts and %d cgroups found and removed by winproc doctor -fix in %v",
		count, len(systems), wine, mounts, len(cgroups), took.Round(time.Millisecond))

	if !wipe {
		// containerd, started again, forgets the tasks whose shims died
		// and removes the pods (and their network namespaces). A pod
		// started then is served by a live shim: the fix leaves it be.
		n.RestartContainerd(t)
		live := startServingPod(t, n, client, "orphan-live")
		requireCheck(t, doctorFix(t, n, winproc), doctor.CheckOrphans, doctor.OK, "none under")
		live.serves(t)
		stopServingPod(t, n, live)
		ctx := context.Background()
		for _, p := range pods {
			if _, err := p.task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
				t.Errorf("delete the app's task of %s: %v", p.name, err)
			}
			if err := p.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
				t.Errorf("delete the app of %s: %v", p.name, err)
			}
			mustCrictl(t, n, "stopp", p.id)
			mustCrictl(t, n, "rmp", p.id)
		}
		mustCrictl(t, n, "stopp", agents)
		mustCrictl(t, n, "rmp", agents)
	}
}

// doctorFix runs `winproc doctor -fix` against the node, as an operator
// would, and returns its report (its exit status is that of every check:
// containerd is down).
func doctorFix(t *testing.T, n *node.Node, winproc string) *doctor.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, winproc, "doctor", "-config", n.ConfigPath, "-address", n.Address, "-host-build", node.HostBuild, "-timeout", "5s", "-fix", "-json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var r doctor.Report
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("winproc doctor -fix: %v, %v\n%s\n%s", err, jerr, out, stderr.String())
	}
	t.Logf("winproc doctor -fix (%v):\n%s\n%s", err, out, stderr.String())
	return &r
}

// wipeContainerdState loses containerd's state as a crash that takes it
// would: its bundles, sockets and the pods' network namespaces go. The
// emulation's records stay: they hold the systems' mounts, which a wipe
// would reach into.
func wipeContainerdState(t *testing.T, n *node.Node) {
	t.Helper()
	emu := filepath.Dir(n.EmulationRoot())
	state := filepath.Dir(emu)
	for _, m := range emulatednode.Mounts(state) {
		if m != emu && !strings.HasPrefix(m, emu+"/") {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Fatalf("unmount containerd's %s: %v", m, err)
			}
		}
	}
	for _, e := range dirNames(t, state) {
		if e != containerdnames.EmulationStateDir {
			if err := os.RemoveAll(filepath.Join(state, e)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// dirNames lists the names in dir; none when it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// killShims SIGKILLs every shim of the node and waits until each has
// exited, by its state: a dying shim's command line empties before it
// exits, and doctor would still find it running.
func killShims(t *testing.T, n *node.Node) {
	t.Helper()
	shims := n.Shims()
	for _, pid := range shims {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range shims {
		for deadline := time.Now().Add(10 * time.Second); !procscan.Exited(pid); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("shim %d still runs 10 s after SIGKILL", pid)
			}
		}
	}
}
