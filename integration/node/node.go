//go:build linux

// Package node is the integration tests' side of the emulated node: it
// starts an integration/emulatednode node for one test (skipping the test
// when the pinned tools are not there, failing it on errors) and removes it
// when the test ends, pass or fail, and it holds what the tests need beside
// it: leak checks of a task (Leaks), a direct connection to a shim's task
// API, and the HCS document's differential corpus (CorpusPods, also used by
// the Windows node's tests, integration/winenode). The node itself, which
// `make demo` runs too, is integration/emulatednode's.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/options"
)

// ToolsEnv names the directory holding containerd, ctr and crictl (built by
// `make tools`); without it the integration tests skip.
const ToolsEnv = "WINPROC_TOOLS"

// Namespace is the containerd namespace CRI uses, and so the tests.
const Namespace = emulatednode.Namespace

// PauseImage is the pause image the node's winproc handler runs pods with;
// tests import it (there is no registry here).
const PauseImage = "example.com/winproc/pause:test"

// HostBuild is the Windows build the emulated node claims.
const HostBuild = "10.0.20348"

// Node is a running emulated node.
type Node struct {
	*emulatednode.Node
	// owner is the test the node belongs to: daemons a subtest restarts
	// live until the owner ends.
	owner       testing.TB
	containerd  *daemon
	snapshotter *daemon
	// logs are the logs of every daemon the node started, named, shown
	// when the owner has failed once the node is gone: its last checks
	// (leftovers) may fail it too.
	logs []namedLog
}

type namedLog struct {
	name string
	log  *syncbuffer.Buffer
}

// Options change how a node runs; the zero value is what most tests want.
type Options struct {
	// LogLevel of containerd and the snapshotter, "debug" when empty. Long
	// runs keep their logs (held in memory for failure reports) small with
	// "warn".
	LogLevel string
	// SnapshotterDiskBytes, when set, puts the snapshotter's root on a
	// tmpfs of that size: a small disk that unpacks can fill.
	SnapshotterDiskBytes int64
	// StockContainerd runs the unpatched containerd instead of the one
	// whose CRI makes Windows container specs: for the tests that prove
	// the generated config and pods against containerd as shipped.
	StockContainerd bool
	// Sandboxer is the winproc handler's sandboxer: "shim" when empty, or
	// "podsandbox".
	Sandboxer string
	// UnpackConcurrency is how many layers a pull extracts at once: 0 is
	// the generated config's default, 1 containerd's sequential unpack.
	UnpackConcurrency int
}

// Start brings up containerd and the snapshotter. bins holds the project's
// binaries (winproc-snapshotter) built for this test run.
func Start(t testing.TB, bins string) *Node {
	t.Helper()
	return StartWith(t, bins, Options{})
}

// StartWith is Start with options.
func StartWith(t testing.TB, bins string, opts Options) *Node {
	t.Helper()
	if opts.LogLevel == "" {
		opts.LogLevel = "debug"
	}
	tools := os.Getenv(ToolsEnv)
	if tools == "" {
		t.Skipf("%s is not set: run through `make test`, or point it at a directory holding containerd, ctr and crictl (`make tools`)", ToolsEnv)
	}
	dir, err := os.MkdirTemp("", "wpn-")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{
		Node: emulatednode.New(emulatednode.Config{
			Dir:               dir,
			Tools:             tools,
			Bin:               bins,
			Options:           options.Options{WineTemplatePrefix: os.Getenv(winetest.PrefixEnv), PauseImage: PauseImage},
			HostBuild:         HostBuild,
			LogLevel:          opts.LogLevel,
			Sandboxer:         opts.Sandboxer,
			UnpackConcurrency: opts.UnpackConcurrency,
		}),
		owner: t,
	}
	// Processes a failed test left are ended quietly (the tests check
	// for leaks themselves); a mount left behind fails the test.
	t.Cleanup(func() {
		if _, err := n.Clean(); err != nil {
			t.Errorf("the node's leftovers: %v", err)
		}
		if t.Failed() {
			for _, l := range n.logs {
				t.Logf("%s log:\n%s", l.name, l.log.String())
			}
		}
	})
	if opts.SnapshotterDiskBytes > 0 {
		if err := os.Mkdir(n.SnapshotterRoot, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", n.SnapshotterRoot, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", opts.SnapshotterDiskBytes)); err != nil {
			t.Fatalf("mount the snapshotter's small disk: %v", err)
		}
		// After every daemon has stopped (cleanups run last first).
		t.Cleanup(func() {
			if err := syscall.Unmount(n.SnapshotterRoot, 0); err != nil {
				t.Errorf("unmount the snapshotter's disk: %v", err)
			}
		})
	}
	if opts.StockContainerd {
		n.Containerd = emulatednode.StockContainerd
	}
	if _, err := n.WriteConfig(); err != nil {
		t.Fatal(err)
	}
	if _, err := n.WriteCrictlConfig(); err != nil {
		t.Fatal(err)
	}
	n.startSnapshotter(t)
	n.startContainerd(t)
	return n
}

func (n *Node) startSnapshotter(t testing.TB) {
	t.Helper()
	n.snapshotter = n.startDaemon(t, "winproc-snapshotter", n.SnapshotterArgv())
	if err := emulatednode.WaitSocket(n.SnapshotterAddress, 30*time.Second, n.snapshotter.Daemon); err != nil {
		t.Fatalf("%v\n%s", err, n.snapshotter.log.String())
	}
}

// RestartSnapshotter stops winproc-snapshotter as a service manager would
// (SIGTERM) and starts it again.
func (n *Node) RestartSnapshotter(t testing.TB) {
	t.Helper()
	n.snapshotter.stop(t)
	n.startSnapshotter(t)
}

func (n *Node) startContainerd(t testing.TB) {
	t.Helper()
	// containerd finds containerd-shim-winproc-v2 on its PATH.
	n.containerd = n.startDaemon(t, "containerd", n.ContainerdArgv())
	if err := emulatednode.WaitSocket(n.Address, 30*time.Second, n.containerd.Daemon); err != nil {
		t.Fatalf("%v\n%s", err, n.ContainerdLog())
	}
	n.waitContainerd(t)
}

// ContainerdPID and SnapshotterPID are the node's daemons' process IDs.
func (n *Node) ContainerdPID() int  { return n.containerd.Cmd.Process.Pid }
func (n *Node) SnapshotterPID() int { return n.snapshotter.Cmd.Process.Pid }

// RestartContainerd stops containerd as a service manager would (SIGTERM)
// and starts it again with the same config. Shims keep running.
func (n *Node) RestartContainerd(t testing.TB) {
	t.Helper()
	n.containerd.stop(t)
	n.startContainerd(t)
}

// KillContainerd SIGKILLs containerd, as a crash would, and waits until it
// is gone: shims keep running. RestartContainerd starts it again.
func (n *Node) KillContainerd(t testing.TB) {
	t.Helper()
	if err := n.containerd.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); n.containerd.Alive(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("containerd still runs 10 s after SIGKILL")
		}
	}
}

// RuntimeOptions are the winproc handler's options on this node: the
// emulation's Wine template prefix.
func (n *Node) RuntimeOptions() options.Options { return n.Options }

// ContainerdLog returns what containerd has logged so far.
func (n *Node) ContainerdLog() string { return n.containerd.log.String() }

// SnapshotterLog is winproc-snapshotter's output so far.
func (n *Node) SnapshotterLog() string { return n.snapshotter.log.String() }

func (n *Node) waitContainerd(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := n.Ctr(context.Background(), "version")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer: %v\n%s", err, n.ContainerdLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ctr runs ctr against the node in the k8s.io namespace and returns its
// combined output.
func (n *Node) Ctr(ctx context.Context, args ...string) (string, error) {
	return n.run(ctx, filepath.Join(n.Tools, "ctr"), append([]string{"-a", n.Address, "-n", Namespace}, args...)...)
}

// Crictl runs crictl against the node's CRI endpoint and returns its
// combined output.
func (n *Node) Crictl(ctx context.Context, args ...string) (string, error) {
	return n.run(ctx, filepath.Join(n.Tools, "crictl"), n.crictlArgs(args)...)
}

// CrictlCommand is crictl against the node's CRI endpoint as a command to
// start, for verbs that read stdin or run until stopped.
func (n *Node) CrictlCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(n.Tools, "crictl"), n.crictlArgs(args)...)
}

func (n *Node) crictlArgs(args []string) []string {
	return append([]string{"--config", n.CrictlConfigPath}, args...)
}

// CollectGarbage runs containerd's garbage collector now and waits for it:
// containerd removes snapshots from the snapshotter only there. Deleting a
// lease synchronously is the one client call that runs it on demand.
func (n *Node) CollectGarbage(ctx context.Context) error {
	const lease = "winproc-test-gc"
	if _, err := n.Ctr(ctx, "leases", "create", "--id", lease); err != nil {
		return err
	}
	_, err := n.Ctr(ctx, "leases", "delete", "--sync", lease)
	return err
}

// RemoveImages removes every image record and collects the garbage.
func (n *Node) RemoveImages(ctx context.Context) error {
	out, err := n.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return err
	}
	if refs := strings.Fields(out); len(refs) > 0 {
		if _, err := n.Ctr(ctx, append([]string{"images", "rm"}, refs...)...); err != nil {
			return err
		}
	}
	return n.CollectGarbage(ctx)
}

func (n *Node) run(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// daemon is a daemon of the node with its output kept for failure
// reports.
type daemon struct {
	*emulatednode.Daemon
	log *syncbuffer.Buffer
}

// startDaemon starts a daemon of the node and stops it when the node's
// owner test ends.
func (n *Node) startDaemon(t testing.TB, name string, argv []string) *daemon {
	t.Helper()
	d := &daemon{log: &syncbuffer.Buffer{}}
	var err error
	if d.Daemon, err = n.Start(name, d.log, argv); err != nil {
		t.Fatal(err)
	}
	n.logs = append(n.logs, namedLog{name, d.log})
	n.owner.Cleanup(func() { d.stop(n.owner) })
	return d
}

// stop ends the daemon: SIGTERM, SIGKILL after 10 s (a failure).
func (d *daemon) stop(t testing.TB) {
	if err := d.Stop(10 * time.Second); err != nil {
		t.Error(err)
	}
}

// BuildBinaries builds the project's commands for goos ("linux" or
// "windows") into dir.
func BuildBinaries(dir, goos string, cmds ...string) error {
	args := []string{"build", "-o", dir + "/"}
	for _, c := range cmds {
		args = append(args, "github.com/winproc/winproc/cmd/"+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("build %v for %s: %w", cmds, goos, err), errors.New(string(out)))
	}
	return nil
}
