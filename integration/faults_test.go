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

// faultRun is TestFaults's node, its pods and its table, shared by the
// subtests.
type faultRun struct {
	n      *node.Node
	client *containerd.Client
	count  int
	pods   []*servingPod
	table  faultTable
}

// Serving pods through the faults a node lives through: containerd
// restarting, the snapshotter restarting, a pod's shim killed, the
// snapshotter's disk filling up during a layer unpack, the emulation's
// faults (faults_emulation_test.go), and layers held while images are
// removed (faults_snapshotter_test.go). Afterwards every pod still serves or
// was stopped and removed cleanly, the full disk gave a clear error and
// left no partial snapshot, and once the pods are removed nothing is left.
// The table of what each fault did is logged at the end.
func TestFaults(t *testing.T) {
	if os.Getenv(FaultsEnv) == "" {
		t.Skipf("%s is not set: run `make faults`", FaultsEnv)
	}
	f := &faultRun{count: envInt(t, FaultsEnv, 20)}
	f.n = node.StartWith(t, bins, node.Options{LogLevel: "info", SnapshotterDiskBytes: 256 << 20})
	importPodImages(t, f.n)
	f.client = newClient(t, f.n)
	t.Cleanup(func() { f.table.log(t) })
	imageSnapshots := len(ctrRows(t, f.n, "snapshots", "--snapshotter", "windowsfilter", "ls"))

	for i := range f.count {
		f.pods = append(f.pods, startServingPod(t, f.n, f.client, fmt.Sprintf("fault-%d", i)))
	}
	f.allServe(t, &faultRow{})

	t.Run("ContainerdRestart", f.containerdRestart)
	t.Run("SnapshotterRestart", f.snapshotterRestart)
	t.Run("KilledShim", f.killedShim)
	t.Run("FullDiskDuringUnpack", f.fullDisk)

	for _, p := range f.pods {
		stopServingPod(t, f.n, p)
	}
	for _, fault := range emulationFaults {
		t.Run(fault.name, func(t *testing.T) { f.emulationFault(t, fault) })
	}
	t.Run("SnapshotterLayersHeld", f.snapshotterLayersHeld)
	requireNodeClean(t, f.n, imageSnapshots)
}

// snapshotterLayersHeld is the snapshotter's row (snapshotterFaults): its
// "pods" are the images removed while their layers are held.
func (f *faultRun) snapshotterLayersHeld(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("making a layer immutable (chattr +i) needs root")
	}
	images, calls, inDeadline, removed, left := snapshotterFaults(t, f.n, max(2, f.count))
	row := faultRow{fault: "snapshotter: layers held (images)", pods: images, calls: calls, inDeadline: inDeadline, removed: removed}
	if left != "" {
		row.left = []string{left}
	}
	f.table.add(row)
	if inDeadline != calls || removed != images || left != "" {
		t.Errorf("%d of %d calls within their deadline, %d of %d images removed, left %q", inDeadline, calls, removed, images, left)
	}
}

// allServe checks that every pod serves and that crictl lists them all
// ready, counting the crictl call in row.
func (f *faultRun) allServe(t *testing.T, row *faultRow) {
	t.Helper()
	for _, p := range f.pods {
		p.serves(t)
	}
	var out string
	if err := row.call(context.Background(), func(ctx context.Context) (err error) {
		out, err = f.n.Crictl(ctx, "pods")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "Ready") && !strings.Contains(line, "NotReady") {
			ready++
		}
	}
	if ready != len(f.pods) {
		t.Errorf("crictl pods lists %d ready pods, want %d", ready, len(f.pods))
	}
}

func (f *faultRun) containerdRestart(t *testing.T) {
	row := faultRow{fault: "containerd restart", pods: len(f.pods)}
	defer func() { f.table.add(row) }()
	f.n.RestartContainerd(t)
	f.allServe(t, &row)
	execProbe(t, f.pods[0].task, "after-containerd-restart")
}

func (f *faultRun) snapshotterRestart(t *testing.T) {
	row := faultRow{fault: "snapshotter restart", pods: len(f.pods) + 1}
	defer func() { f.table.add(row) }()
	f.n.RestartSnapshotter(t)
	f.allServe(t, &row)
	// The restarted snapshotter serves a whole new pod.
	p := startServingPod(t, f.n, f.client, "after-snapshotter-restart")
	p.serves(t)
	stopServingPod(t, f.n, p)
	row.removed = 1
	row.left = f.n.Leaks(p.id)
}

func (f *faultRun) killedShim(t *testing.T) {
	row := faultRow{fault: "killed shim", pods: 1}
	defer func() { f.table.add(row) }()
	victim := f.pods[0]
	f.pods = f.pods[1:]
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
	waitPodNotReady(t, f.n, victim.id)
	ctx := context.Background()
	if err := row.call(ctx, func(ctx context.Context) error {
		_, err := victim.task.Delete(ctx)
		if errdefs.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		t.Error(err)
	}
	if err := row.call(ctx, func(ctx context.Context) error { return victim.c.Delete(ctx, containerd.WithSnapshotCleanup) }); err != nil {
		t.Error(err)
	}
	for _, verb := range []string{"stopp", "rmp"} {
		if err := row.call(ctx, func(ctx context.Context) error { _, err := f.n.Crictl(ctx, verb, victim.id); return err }); err != nil {
			t.Fatal(err)
		}
	}
	row.removed = 1
	requireNoLeaksWithin(t, f.n, victim.name+"-app", time.Minute)
	requireNoLeaks(t, f.n, victim.id)
	row.left = append(f.n.Leaks(victim.name+"-app"), f.n.Leaks(victim.id)...)
	f.allServe(t, &row)
}

func (f *faultRun) fullDisk(t *testing.T) {
	row := faultRow{fault: "full disk during unpack", pods: len(f.pods) + 1}
	defer func() { f.table.add(row) }()
	n := f.n
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
	const ref = "example.com/winproc/too-big:test"
	archive := imageArchive(t, ref, node.HostBuild+".1", testApp, map[string][]byte{"winproc-testapp.exe": winBin(t, "winproc-testapp.exe"), "big.bin": incompressible(free + 16<<20)})
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
	f.allServe(t, &row)
	// The node still makes pods.
	p := startServingPod(t, n, f.client, "after-full-disk")
	p.serves(t)
	stopServingPod(t, n, p)
	row.removed = 1
	row.left = n.Leaks(p.id)
}

// incompressible returns size bytes of noise, as large on the wire as
// unpacked.
func incompressible(size int64) []byte {
	big := make([]byte, size)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i+8 <= len(big); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			big[i+j] = byte(v >> (8 * j))
		}
	}
	return big
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
