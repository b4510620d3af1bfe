//go:build linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/procscan"
)

// FaultsEnv sets how many serving pods TestFaults runs; without it
// TestFaults skips (`make faults` sets it).
const FaultsEnv = "WINPROC_FAULT_PODS"

// Serving pods through the faults a node lives through: containerd
// restarting, the snapshotter restarting, a pod's shim killed, and the
// snapshotter's disk filling up during a layer unpack. Afterwards every pod
// still serves or was stopped and removed cleanly, the full disk gave a
// clear error and left no partial snapshot, and once the pods are removed
// nothing is left.
func TestFaults(t *testing.T) {
	if os.Getenv(FaultsEnv) == "" {
		t.Skipf("%s is not set: run `make faults`", FaultsEnv)
	}
	count := envInt(t, FaultsEnv, 20)
	n := node.StartWith(t, bins, node.Options{LogLevel: "info", SnapshotterDiskBytes: 256 << 20})
	importPodImages(t, n)
	client := newClient(t, n)
	imageSnapshots := len(ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"))

	var pods []*servingPod
	for i := range count {
		pods = append(pods, startServingPod(t, n, client, fmt.Sprintf("fault-%d", i)))
	}
	allServe := func(t *testing.T) {
		t.Helper()
		for _, p := range pods {
			p.serves(t)
		}
		ready := 0
		for _, line := range strings.Split(mustCrictl(t, n, "pods"), "\n") {
			if strings.Contains(line, "Ready") && !strings.Contains(line, "NotReady") {
				ready++
			}
		}
		if ready != len(pods) {
			t.Errorf("crictl pods lists %d ready pods, want %d", ready, len(pods))
		}
	}
	allServe(t)

	t.Run("ContainerdRestart", func(t *testing.T) {
		n.RestartContainerd(t)
		allServe(t)
		execProbe(t, pods[0].task, "after-containerd-restart")
	})

	t.Run("SnapshotterRestart", func(t *testing.T) {
		n.RestartSnapshotter(t)
		allServe(t)
		// The restarted snapshotter serves a whole new pod.
		p := startServingPod(t, n, client, "after-snapshotter-restart")
		p.serves(t)
		stopServingPod(t, n, p)
	})

	t.Run("KilledShim", func(t *testing.T) {
		victim := pods[0]
		pods = pods[1:]
		shim := procscan.Live(func(_ int, cmdline, _ []byte) bool {
			return bytes.Contains(cmdline, []byte("containerd-shim-winproc-v2")) && bytes.Contains(cmdline, []byte(victim.id))
		})
		if len(shim) != 1 {
			t.Fatalf("shims of pod %s: %v, want 1", victim.name, shim)
		}
		exited := victim.wait(t)
		if err := syscall.Kill(shim[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if st := waitStatus(t, exited); st.ExitCode() != 255 {
			t.Errorf("app exit after its shim was killed: %d, want 255", st.ExitCode())
		}
		waitPodNotReady(t, n, victim.id)
		ctx := context.Background()
		if _, err := victim.task.Delete(ctx); err != nil && !errdefs.IsNotFound(err) {
			t.Error(err)
		}
		if err := victim.c.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
			t.Error(err)
		}
		mustCrictl(t, n, "stopp", victim.id)
		mustCrictl(t, n, "rmp", victim.id)
		requireNoLeaksWithin(t, n, victim.name+"-app", time.Minute)
		requireNoLeaks(t, n, victim.id)
		allServe(t)
	})

	t.Run("FullDiskDuringUnpack", func(t *testing.T) {
		var fs unix.Statfs_t
		if err := unix.Statfs(n.SnapshotterRoot, &fs); err != nil {
			t.Fatal(err)
		}
		free := int64(fs.Bavail) * fs.Bsize
		if err := n.CollectGarbage(context.Background()); err != nil {
			t.Fatal(err)
		}
		snapshotsBefore := snapshotDirs(t, n)
		keysBefore := ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls")
		// Incompressible, so the layer is as large on the wire as unpacked.
		big := make([]byte, free+16<<20)
		rng := rand.New(rand.NewPCG(5, 6))
		for i := 0; i+8 <= len(big); i += 8 {
			v := rng.Uint64()
			for j := range 8 {
				big[i+j] = byte(v >> (8 * j))
			}
		}
		const ref = "example.com/winproc/too-big:test"
		archive := imageArchive(t, ref, node.HostBuild+".1", testApp, map[string][]byte{"winproc-testapp.exe": winBin(t, "winproc-testapp.exe"), "big.bin": big})
		big = nil
		out, err := n.Ctr(context.Background(), "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive)
		if err == nil {
			t.Fatalf("unpacking %d MiB onto a disk with %d MiB free succeeded:\n%s", (free+16<<20)>>20, free>>20, out)
		}
		if !strings.Contains(out, "no space left on device") {
			t.Errorf("the import's error does not say the disk is full:\n%s", out)
		}
		t.Logf("full disk: %s", lastLine(out))
		// The image record (if the import made one) goes, and with it the
		// content; nothing of the failed unpack may stay.
		n.Ctr(context.Background(), "images", "rm", ref)
		if err := n.CollectGarbage(context.Background()); err != nil {
			t.Fatal(err)
		}
		if keys := ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"); strings.Join(keys, "\n") != strings.Join(keysBefore, "\n") {
			t.Errorf("snapshots after the failed unpack:\n%s\nbefore:\n%s", strings.Join(keys, "\n"), strings.Join(keysBefore, "\n"))
		}
		if after := snapshotDirs(t, n); strings.Join(after, " ") != strings.Join(snapshotsBefore, " ") {
			t.Errorf("snapshot directories after the failed unpack %v, before %v", after, snapshotsBefore)
		}
		if err := unix.Statfs(n.SnapshotterRoot, &fs); err != nil {
			t.Fatal(err)
		}
		if now := int64(fs.Bavail) * fs.Bsize; now < free-1<<20 {
			t.Errorf("the failed unpack keeps %d KiB of the disk", (free-now)>>10)
		}
		allServe(t)
		// The node still makes pods.
		p := startServingPod(t, n, client, "after-full-disk")
		p.serves(t)
		stopServingPod(t, n, p)
	})

	for _, p := range pods {
		stopServingPod(t, n, p)
	}
	requireNodeClean(t, n, imageSnapshots)
}

// waitPodNotReady waits until crictl reports pod id not ready: while
// containerd runs a dead shim's `delete` the pod's status fails, and a
// kubelet retries.
func waitPodNotReady(t *testing.T, n *node.Node, id string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := n.Crictl(context.Background(), "inspectp", "-o", "json", id)
		if err == nil && strings.Contains(out, "SANDBOX_NOTREADY") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s never became not ready: %v\n%s", id, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func mustCrictl(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	out, err := n.Crictl(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
