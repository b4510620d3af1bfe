//go:build linux

// Package node runs an emulated Windows node for integration tests: the
// pinned containerd, configured by the project's own config generator, with
// winproc-snapshotter serving the windowsfilter snapshotter and differ.
// Everything it starts lives in one temporary directory and is stopped,
// unmounted and removed when the test ends, pass or fail.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/sys/mountinfo"
	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/runtimeclass/containerdconfig"
	"github.com/winproc/winproc/shim/options"
)

// ToolsEnv names the directory holding containerd, ctr and crictl (built by
// `make tools`); without it the integration tests skip.
const ToolsEnv = "WINPROC_TOOLS"

// Namespace is the containerd namespace CRI uses, and so the tests.
const Namespace = "k8s.io"

// PauseImage is the pause image the node's winproc handler runs pods with;
// tests import it (there is no registry here).
const PauseImage = "example.com/winproc/pause:test"

// HostBuild is the Windows build the emulated node claims.
const HostBuild = "10.0.20348"

// Node is a running emulated node.
type Node struct {
	Dir                string // everything of this node lives below Dir
	Tools              string
	bins               string
	Address            string // containerd's socket
	SnapshotterAddress string
	SnapshotterRoot    string
	ConfigPath         string
	opts               Options
	// owner is the test the node belongs to: daemons a subtest restarts
	// live until the owner ends.
	owner       testing.TB
	containerd  *daemon
	snapshotter *daemon
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
	// Unix socket paths are limited to 108 bytes: keep the directory short.
	dir, err := os.MkdirTemp("", "wpn-")
	if err != nil {
		t.Fatal(err)
	}
	n := &Node{
		Dir:                dir,
		Tools:              tools,
		bins:               bins,
		Address:            filepath.Join(dir, "containerd.sock"),
		SnapshotterAddress: filepath.Join(dir, "snapshotter.sock"),
		SnapshotterRoot:    filepath.Join(dir, "snapshotter"),
		ConfigPath:         filepath.Join(dir, "config.toml"),
		opts:               opts,
		owner:              t,
	}
	t.Cleanup(func() { n.cleanupDir(t) })
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

	config, err := containerdconfig.Generate(containerdconfig.Node{
		OS:                    "linux",
		Options:               n.RuntimeOptions(),
		DisablePauseImagePull: true,
		Root:                  filepath.Join(dir, "root"),
		State:                 filepath.Join(dir, "state"),
		Address:               n.Address,
		ShimSocketDir:         filepath.Join(dir, "s"),
		SnapshotterAddress:    n.SnapshotterAddress,
		Handler:               "winproc",
		Sandboxer:             "shim",
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.ConfigPath, config, 0o600); err != nil {
		t.Fatal(err)
	}

	n.startSnapshotter(t)
	n.startContainerd(t)
	return n
}

func (n *Node) startSnapshotter(t testing.TB) {
	t.Helper()
	n.snapshotter = n.startProcess(t, "winproc-snapshotter", filepath.Join(n.bins, "winproc-snapshotter"),
		"-root", n.SnapshotterRoot, "-address", n.SnapshotterAddress,
		"-containerd-address", n.Address, "-host-build", HostBuild, "-log-level", n.opts.LogLevel)
	waitSocket(t, n.SnapshotterAddress)
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
	n.containerd = n.startProcess(t, "containerd", filepath.Join(n.Tools, "containerd"), "-c", n.ConfigPath, "-l", n.opts.LogLevel)
	waitSocket(t, n.Address)
	n.waitContainerd(t)
}

// ContainerdPID and SnapshotterPID are the node's daemons' process IDs.
func (n *Node) ContainerdPID() int  { return n.containerd.cmd.Process.Pid }
func (n *Node) SnapshotterPID() int { return n.snapshotter.cmd.Process.Pid }

// RestartContainerd stops containerd as a service manager would (SIGTERM)
// and starts it again with the same config. Shims keep running.
func (n *Node) RestartContainerd(t testing.TB) {
	t.Helper()
	n.containerd.stop(t)
	n.startContainerd(t)
}

// RuntimeOptions are the winproc handler's options on this node: the
// emulation's Wine template prefix.
func (n *Node) RuntimeOptions() options.Options {
	return options.Options{WineTemplatePrefix: os.Getenv(winetest.PrefixEnv), PauseImage: PauseImage}
}

// ContainerdLog returns what containerd has logged so far.
func (n *Node) ContainerdLog() string { return n.containerd.log.String() }

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
	endpoint := "unix://" + n.Address
	return n.run(ctx, filepath.Join(n.Tools, "crictl"), append([]string{"--runtime-endpoint", endpoint, "--image-endpoint", endpoint, "--timeout", "60s"}, args...)...)
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

// daemon is a process the node started.
type daemon struct {
	name   string
	cmd    *exec.Cmd
	log    *syncbuffer.Buffer
	exited chan struct{}
	once   sync.Once
}

// startProcess starts a daemon of the node in its own process group and
// stops it when the test ends.
func (n *Node) startProcess(t testing.TB, name, bin string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, log: &syncbuffer.Buffer{}, exited: make(chan struct{})}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Env = append(os.Environ(), "PATH="+n.bins+":"+os.Getenv("PATH"))
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		d.cmd.Wait()
		close(d.exited)
	}()
	n.owner.Cleanup(func() {
		d.stop(n.owner)
		if n.owner.Failed() {
			n.owner.Logf("%s log:\n%s", name, d.log.String())
		}
	})
	return d
}

// stop ends the daemon: SIGTERM to its process group, SIGKILL after 10 s.
// Shims started by containerd run in process groups of their own and are
// not touched.
func (d *daemon) stop(t testing.TB) {
	d.once.Do(func() {
		syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not stop within 10 s of SIGTERM; killing it", d.name)
			syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.exited
		}
	})
}

// cleanupDir unmounts anything left below the node's directory (reporting it:
// a leak is a failure) and removes the directory.
func (n *Node) cleanupDir(t testing.TB) {
	n.killLeftovers()
	for _, m := range Mounts(n.Dir) {
		t.Errorf("mount left behind: %s", m)
		syscall.Unmount(m, syscall.MNT_DETACH)
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		t.Errorf("remove node directory: %v", err)
	}
}

// Mounts lists the mount points at or below dir.
func Mounts(dir string) []string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil
	}
	found := make([]string, len(infos))
	for i, m := range infos {
		found[i] = m.Mountpoint
	}
	return found
}

func waitSocket(t testing.TB, path string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", path, err)
		}
		time.Sleep(50 * time.Millisecond)
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
