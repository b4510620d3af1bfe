//go:build linux

// Package emulatednode is the emulated Windows node itself, on Linux: the
// pinned containerd, configured by the project's own generator, with
// winproc-snapshotter serving the windowsfilter snapshotter and differ and
// the shim's emulation backend running compute systems under Wine. It
// knows nothing of tests: the integration tests reach it through
// integration/node, which ties a node to a test, and `make demo` runs it
// directly; each adds its own reporting (test failures, the demo's
// transcript). The Windows node under Wine, where the Windows builds run,
// is integration/winenode.
package emulatednode

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/ttrpc"
	"github.com/moby/sys/mountinfo"

	"github.com/winproc/winproc/containerdconfig"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/shim/options"
)

// Namespace is the containerd namespace CRI uses.
const Namespace = "k8s.io"

// Handler is the runtime handler winproc is registered under.
const Handler = "winproc"

// The containerd builds in Tools (build/tools.sh): the stock one, and the
// same with build/containerd-wincri.patch, whose CRI, built for Linux,
// makes Windows container specs as the Windows build does (a tool of this
// node only; docs/test-node.md).
const (
	StockContainerd  = "containerd"
	WinCRIContainerd = "containerd-wincri"
)

// Config describes a node.
type Config struct {
	// Dir holds everything of the node. Unix socket paths are limited to
	// 108 bytes, and the sockets live below it: keep it short.
	Dir string
	// Tools holds containerd (`make tools`); Bin holds the project's Linux
	// binaries (winproc-snapshotter, containerd-shim-winproc-v2), which
	// lead the daemons' PATH so that containerd finds the shim.
	Tools, Bin string
	// Containerd is the containerd build in Tools the node runs:
	// WinCRIContainerd when empty, for containers through CRI, or
	// StockContainerd.
	Containerd string
	// Sandboxer is the winproc handler's: "shim" when empty, or
	// "podsandbox" (containerd-wincri only: the stock Linux build gives a
	// pod's pause container a Linux spec).
	Sandboxer string
	// Options are the winproc handler's runtime options.
	Options options.Options
	// HostBuild is the Windows build the snapshotter claims.
	HostBuild string
	// LogLevel is the daemons' log level; "" keeps their default.
	LogLevel string
	// SnapshotterRoot is the snapshotter's root; "" is Dir/snapshotter.
	SnapshotterRoot string
	// UnpackConcurrency is how many layers a pull extracts at once (see
	// containerdconfig.Node); 0 is the generator's default.
	UnpackConcurrency int
	// Env is the daemons' environment; nil is this process's. The PATH
	// given to them starts with Bin either way.
	Env []string
}

// Node is a node's layout: where its config, sockets and roots are.
type Node struct {
	Config
	Address            string // containerd's socket
	SnapshotterAddress string
	ConfigPath         string
	// PodSubnet is where the node's pods get their addresses from; set by
	// WriteConfig.
	PodSubnet *net.IPNet
	// CrictlConfigPath is crictl's config for the node (its endpoints),
	// which WriteCrictlConfig writes: CRI_CONFIG_FILE or --config.
	CrictlConfigPath string
}

// New lays a node out below cfg.Dir; nothing is started.
func New(cfg Config) *Node {
	if cfg.SnapshotterRoot == "" {
		cfg.SnapshotterRoot = filepath.Join(cfg.Dir, "snapshotter")
	}
	return &Node{
		Config:             cfg,
		Address:            filepath.Join(cfg.Dir, "containerd.sock"),
		SnapshotterAddress: filepath.Join(cfg.Dir, "snapshotter.sock"),
		ConfigPath:         filepath.Join(cfg.Dir, "config.toml"),
		CrictlConfigPath:   filepath.Join(cfg.Dir, "crictl.yaml"),
	}
}

// WriteConfig generates containerd's config for the node (the winproc
// handler owning its pods, the snapshotter's proxy plugins, state below
// Dir) and writes it to ConfigPath. It returns the config.
func (n *Node) WriteConfig() ([]byte, error) {
	config, err := containerdconfig.Generate(containerdconfig.Node{
		OS:                    "linux",
		Options:               n.Options,
		DisablePauseImagePull: true,
		Root:                  filepath.Join(n.Dir, "root"),
		State:                 filepath.Join(n.Dir, "state"),
		Address:               n.Address,
		ShimSocketDir:         filepath.Join(n.Dir, "s"),
		SnapshotterAddress:    n.SnapshotterAddress,
		SnapshotterRoot:       n.SnapshotterRoot,
		CRIDefaultSnapshotter: true,
		Handler:               Handler,
		Sandboxer:             cmp.Or(n.Sandboxer, "shim"),
		CNIBinDirs:            []string{filepath.Join(n.Tools, CNIBinDir)},
		CNIConfDir:            n.cniConfDir(),
		NetNSUnderState:       true,
		UnpackConcurrency:     n.UnpackConcurrency,
	})
	if err != nil {
		return nil, err
	}
	if err := n.writeCNIConfig(); err != nil {
		return nil, fmt.Errorf("pod network: %w", err)
	}
	return config, os.WriteFile(n.ConfigPath, config, 0o600)
}

// WriteCrictlConfig writes crictl's config for the node to
// CrictlConfigPath and returns it.
func (n *Node) WriteCrictlConfig() ([]byte, error) {
	config := fmt.Appendf(nil, "runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", n.Address, n.Address)
	return config, os.WriteFile(n.CrictlConfigPath, config, 0o644)
}

// SnapshotterArgv is the command line of the node's winproc-snapshotter.
func (n *Node) SnapshotterArgv() []string {
	argv := []string{filepath.Join(n.Bin, "winproc-snapshotter"),
		"-root", n.SnapshotterRoot, "-address", n.SnapshotterAddress,
		"-containerd-address", n.Address, "-host-build", n.HostBuild}
	if n.LogLevel != "" {
		argv = append(argv, "-log-level", n.LogLevel)
	}
	return argv
}

// ContainerdArgv is the command line of the node's containerd.
func (n *Node) ContainerdArgv() []string {
	bin := n.Containerd
	if bin == "" {
		bin = WinCRIContainerd
	}
	argv := []string{filepath.Join(n.Tools, bin), "-c", n.ConfigPath}
	if n.LogLevel != "" {
		argv = append(argv, "-l", n.LogLevel)
	}
	return argv
}

// Start starts argv as a daemon of the node, in a process group of its
// own (so that a terminal's Ctrl-C reaches the caller, which stops it in
// order), writing its output to out.
func (n *Node) Start(name string, out io.Writer, argv []string) (*Daemon, error) {
	env := n.Env
	if env == nil {
		env = os.Environ()
	}
	d := &Daemon{Name: name, exited: make(chan struct{})}
	d.Cmd = exec.Command(argv[0], argv[1:]...)
	d.Cmd.Env = append(slices.Clip(env), "PATH="+n.Bin+":"+pathOf(env))
	d.Cmd.Stdout, d.Cmd.Stderr = out, out
	d.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// The waiter is the daemon's own and ends with it.
	go func() {
		d.Cmd.Wait()
		close(d.exited)
	}()
	return d, nil
}

func pathOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}

// Daemon is a long-running process of a node: containerd, the snapshotter.
type Daemon struct {
	Name    string
	Cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// Alive reports whether the daemon still runs.
func (d *Daemon) Alive() bool {
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// Stop ends the daemon as a service manager would: SIGTERM to its process
// group, SIGKILL after grace. Shims, which containerd starts in process
// groups of their own, are not touched. Stopping twice is harmless.
func (d *Daemon) Stop(grace time.Duration) error {
	if d == nil || d.stopped {
		return nil
	}
	d.stopped = true
	syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-d.exited:
		return nil
	case <-time.After(grace):
		syscall.Kill(-d.Cmd.Process.Pid, syscall.SIGKILL)
		<-d.exited
		return fmt.Errorf("%s did not stop within %v of SIGTERM; killed it", d.Name, grace)
	}
}

// WaitSocket waits until something accepts connections on the unix socket
// path, for up to limit, or until d (if not nil) exits.
func WaitSocket(path string, limit time.Duration, d *Daemon) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		if d != nil && !d.Alive() {
			return fmt.Errorf("%s exited before listening on %s", d.Name, path)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %v: %w", path, limit, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// EmulationRoot is where the shim's emulation backend keeps the node's
// compute systems (inside containerd's state directory).
func (n *Node) EmulationRoot() string {
	return filepath.Join(n.Dir, "state", containerdnames.EmulationStateDir, Namespace)
}

// Bundle is the task bundle containerd makes for container id; "" gives
// the namespace's directory of bundles.
func (n *Node) Bundle(id string) string {
	return filepath.Join(n.Dir, "state", "io.containerd.runtime.v2.task", Namespace, id)
}

// SandboxBundle is the state directory containerd's shim sandbox
// controller makes for pod id; "" gives the namespace's directory.
func (n *Node) SandboxBundle(id string) string {
	return filepath.Join(n.Dir, "state", "io.containerd.sandbox.controller.v1.shim", Namespace, id)
}

// TTRPCAddress is containerd's ttrpc socket (shims publish events there):
// containerd derives it from the gRPC address.
func (n *Node) TTRPCAddress() string { return n.Address + ".ttrpc" }

// ShimSocket is the unix socket the shim serving container id listens on,
// as containerd recorded it in the task's bundle (bootstrap.json).
func (n *Node) ShimSocket(id string) (string, error) {
	path := filepath.Join(n.Bundle(id), "bootstrap.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var params struct {
		Address  string `json:"address"`
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(b, &params); err != nil {
		return "", fmt.Errorf("decode %s: %w", path, err)
	}
	if params.Protocol != "ttrpc" || !strings.HasPrefix(params.Address, "unix://") {
		return "", fmt.Errorf("the shim of %s serves %s on %s, want ttrpc on a unix socket", id, params.Protocol, params.Address)
	}
	return strings.TrimPrefix(params.Address, "unix://"), nil
}

// DialShim connects to the ttrpc socket of the shim serving container id.
func (n *Node) DialShim(ctx context.Context, id string) (*ttrpc.Client, error) {
	socket, err := n.ShimSocket(id)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	return ttrpc.NewClient(conn), nil
}

// Shims lists the live shim processes serving the node's containerd.
func (n *Node) Shims() []int {
	return procscan.Live(func(_ int, cmdline, _ []byte) bool {
		return bytes.Contains(cmdline, []byte("containerd-shim-winproc-v2")) && bytes.Contains(cmdline, []byte(n.Address))
	})
}

// WineProcesses lists the live Wine processes of the node's compute
// systems: their WINEPREFIX lies below Dir.
func (n *Node) WineProcesses() []int {
	return procscan.Live(func(_ int, _, environ []byte) bool {
		return bytes.Contains(environ, []byte("WINEPREFIX="+n.Dir+"/"))
	})
}

// Processes lists the node's live shims and Wine processes.
func (n *Node) Processes() []int { return append(n.Shims(), n.WineProcesses()...) }

// Mounts lists the mount points at or below dir, deepest first (the order
// to unmount them in).
func Mounts(dir string) []string {
	infos, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil
	}
	found := make([]string, len(infos))
	for i, m := range infos {
		found[i] = m.Mountpoint
	}
	// mountinfo lists mounts in the order they were made: a mount on top
	// of another comes later.
	for i, j := 0, len(found)-1; i < j; i, j = i+1, j-1 {
		found[i], found[j] = found[j], found[i]
	}
	return found
}

// Clean forces away what is left of the node after its daemons stopped:
// it kills the shims and Wine processes (and returns their pids), detaches
// the mounts below Dir (an error: a mount left behind is a leak) and
// removes Dir.
func (n *Node) Clean() (killed []int, err error) {
	killed = n.Processes()
	for _, pid := range killed {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(10 * time.Second); len(killed) > 0 && time.Now().Before(deadline) && len(n.Processes()) > 0; {
		time.Sleep(100 * time.Millisecond)
	}
	var errs []error
	if mounts := Mounts(n.Dir); len(mounts) > 0 {
		for _, m := range mounts {
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
		errs = append(errs, fmt.Errorf("unmounted mounts left behind: %v", mounts))
	}
	if err := n.removeBridge(); err != nil {
		errs = append(errs, fmt.Errorf("remove the pod network's bridge: %w", err))
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	return killed, errors.Join(errs...)
}
