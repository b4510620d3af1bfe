//go:build linux

// Package winenode runs winproc's Windows binaries as a Windows node runs
// them, under Wine: containerd.exe and ctr.exe of the pinned containerd
// (build/tools.sh builds them for Windows), winproc-snapshotter.exe serving
// containerd.exe as its snapshot and diff proxy plugins,
// containerd-shim-winproc-v2.exe as containerd.exe launches it, and
// `winproc.exe doctor`. Each node is one private Wine prefix (an overlay on
// the template prefix) laid out as install.ps1 lays out a node: the binaries
// and config.toml in C:\Program Files\containerd, install/'s config fragment
// imported from its conf.d, containerd's default root, state and pipe.
//
// Wine has no HCS, HCN, layer functions, bind filter or BackupWrite. Without
// stand-ins the tests prove what a node does before those, and that where
// they are needed the error says so. With them (testdata/standins, built
// with MinGW; Options.Standins: computecore.dll, computenetwork.dll,
// vmcompute.dll, bindfltapi.dll, and the test CNI plugin), crictl.exe
// drives containerd.exe's own Windows CRI plugin through HostProcess pods,
// whose job objects are Wine's own, and ordinary pods, whose compute
// systems are the HCS stand-in's (docs/test-node.md). With Options.Runhcs
// the incumbent shim, containerd-shim-runhcs-v1.exe, serves a second
// runtime handler beside winproc's (runhcs.go; `make peer`, docs/peer.md).
package winenode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/install"
	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
)

// Where a node keeps things, as Windows paths and as install.ps1 and
// containerd's defaults have them.
const (
	InstallDir      = `C:\Program Files\containerd`
	ContainerdState = `C:\ProgramData\containerd\state`
	SnapshotterRoot = `C:\ProgramData\winproc\snapshotter`
	// HostBuild is the Windows build the node reports (Wine's own prefix
	// says Windows 7), with a UBR value, which Wine lacks.
	HostBuild = "10.0.20348"
	hostBuild = 20348
	hostUBR   = 3027
)

// Binaries names the files a node runs: the pinned containerd's Windows
// build, and the project's Windows commands.
type Binaries struct {
	// Containerd holds containerd.exe and ctr.exe.
	Containerd string
	// Project holds containerd-shim-winproc-v2.exe, winproc-snapshotter.exe,
	// winproc.exe and shimclient.exe (this package's shimclient command).
	Project string
	// Crictl is crictl.exe, the pinned cri-tools built for Windows.
	Crictl string
	// Standins holds the stand-in DLLs (BuildStandins).
	Standins string
	// Runhcs is containerd-shim-runhcs-v1.exe, the incumbent shim built
	// for the node (build/tools.sh), for Options.Runhcs.
	Runhcs string
}

// Options change how a node is laid out.
type Options struct {
	// Standins installs the stand-in DLLs in the node's System32, where
	// the shim and containerd.exe load them from, and the test CNI
	// plugin (cniplugin) with its network config.
	Standins bool
	// Sandboxer is the winproc handler's sandboxer, "podsandbox" (install/'s
	// default) or "shim".
	Sandboxer string
	// DefaultHandler installs install/'s fragment that makes winproc the
	// node's default runtime handler, as HostProcess DaemonSets need.
	DefaultHandler bool
	// Runhcs installs the incumbent shim (Binaries.Runhcs) and registers
	// it as the runtime handler RunhcsHandler, beside winproc.
	Runhcs bool
	// ShimModeHandler, if set, registers a second winproc handler of that
	// name in shim mode, so that one node runs both sandbox modes.
	ShimModeHandler string
	// LogLevel is containerd.exe's log level (and the runhcs handler's),
	// debug if empty.
	LogLevel string
	// Config is containerd TOML of the node's own (version 3), imported
	// after install/'s fragment, as an operator's own conf.d file is.
	Config string
}

// nodeConfigFile is Options.Config's file in conf.d.
const nodeConfigFile = "zz-node.toml"

// Node is a Windows node in a private Wine prefix, with containerd.exe and
// winproc-snapshotter.exe serving.
type Node struct {
	t      testing.TB
	prefix string
	opts   Options
	// Logs of the two services.
	containerdLog, snapshotterLog syncbuffer.Buffer
	// services are the services' processes, of every boot.
	services []*exec.Cmd
}

// Start makes a node as install.ps1 lays it out and starts its services;
// the test's cleanup stops every Wine process of the node and removes the
// prefix.
func Start(t testing.TB, bins Binaries) *Node { return StartWith(t, bins, Options{}) }

// StartWith is Start with options.
func StartWith(t testing.TB, bins Binaries, opts Options) *Node {
	t.Helper()
	n := &Node{t: t, prefix: winetest.PrivatePrefix(t, winetest.Prefix(t)), opts: opts}
	t.Cleanup(n.dumpLogsOnFailure)

	n.install(bins)
	n.installPeers(bins)
	n.setHostBuild()
	n.nameVolumes()
	n.startServices()
	return n
}

// Path is the Linux path of the node's Windows path p (on C:).
func (n *Node) Path(p string) string {
	rest, ok := strings.CutPrefix(p, `C:\`)
	if !ok {
		n.t.Fatalf("%s is not on C:", p)
	}
	return filepath.Join(n.prefix, "drive_c", filepath.FromSlash(strings.ReplaceAll(rest, `\`, "/")))
}

// WindowsPath is the Windows path (Z:) of the Linux path p.
func WindowsPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// install lays the binaries and config out as install.ps1 does.
func (n *Node) install(bins Binaries) {
	t := n.t
	dst := n.Path(InstallDir)
	if err := os.MkdirAll(filepath.Join(dst, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	fragment := install.FragmentFile
	if n.opts.DefaultHandler {
		fragment = install.DefaultFragmentFile
	}
	copies := map[string]string{
		filepath.Join(bins.Containerd, "containerd.exe"):              "containerd.exe",
		filepath.Join(bins.Containerd, "ctr.exe"):                     "ctr.exe",
		filepath.Join(bins.Project, "containerd-shim-winproc-v2.exe"): "containerd-shim-winproc-v2.exe",
		filepath.Join(bins.Project, "winproc-snapshotter.exe"):        "winproc-snapshotter.exe",
		filepath.Join(bins.Project, "winproc.exe"):                    "winproc.exe",
		filepath.Join(bins.Project, "shimclient.exe"):                 "shimclient.exe",
	}
	if bins.Crictl != "" {
		copies[bins.Crictl] = "crictl.exe"
	}
	for src, name := range copies {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("install %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.installFragment(fragment)
	imports := fmt.Sprintf("'%s\\conf.d\\%s'", InstallDir, install.FragmentFile)
	if n.opts.Config != "" {
		if err := os.WriteFile(filepath.Join(dst, "conf.d", nodeConfigFile), []byte(n.opts.Config), 0o644); err != nil {
			t.Fatal(err)
		}
		imports += fmt.Sprintf(", '%s\\conf.d\\%s'", InstallDir, nodeConfigFile)
	}
	config := fmt.Sprintf("version = 3\nimports = [%s]\n", imports)
	if err := os.WriteFile(filepath.Join(dst, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if n.opts.Standins {
		n.installCNI(bins)
		for _, dll := range standinDLLs {
			b, err := os.ReadFile(filepath.Join(bins.Standins, dll))
			if err != nil {
				t.Fatalf("install the stand-in %s: %v", dll, err)
			}
			if err := os.WriteFile(n.Path(`C:\windows\system32\`+dll), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// installCNI installs the test CNI plugin (cniplugin) and a network
// config naming it where containerd.exe's CRI looks by default.
func (n *Node) installCNI(bins Binaries) {
	b, err := os.ReadFile(filepath.Join(bins.Project, "cniplugin.exe"))
	if err != nil {
		n.t.Fatal(err)
	}
	bin, conf := n.Path(InstallDir+`\cni\bin`), n.Path(InstallDir+`\cni\conf`)
	for _, d := range []string{bin, conf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			n.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "winproc-test.exe"), b, 0o755); err != nil {
		n.t.Fatal(err)
	}
	cfg := `{"cniVersion":"1.0.0","name":"winproc-test","type":"winproc-test","capabilities":{"portMappings":true}}`
	if err := os.WriteFile(filepath.Join(conf, "10-winproc-test.conf"), []byte(cfg), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// installFragment puts install/'s fragment file in conf.d as
// install.ps1 does (under FragmentFile's name), with the sandboxer of
// Options.
func (n *Node) installFragment(file string) {
	b, err := os.ReadFile(filepath.Join("..", "..", "install", file))
	if err != nil {
		n.t.Fatal(err)
	}
	s := string(b)
	if sb := n.opts.Sandboxer; sb != "" {
		const dflt = "sandboxer = 'podsandbox'"
		if !strings.Contains(s, dflt) {
			n.t.Fatalf("%s has no %q to change", file, dflt)
		}
		s = strings.ReplaceAll(s, dflt, fmt.Sprintf("sandboxer = '%s'", sb))
	}
	if err := os.WriteFile(filepath.Join(n.Path(InstallDir), "conf.d", install.FragmentFile), []byte(s), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// nameVolumes lets the node open its drives by their volume names, as
// Windows does: Wine's mount manager names C: and Z: \\?\Volume{GUID}\
// (GetVolumeNameForVolumeMountPoint, and the final paths of
// GetFinalPathNameByHandle, to which containerd.exe and go-winio resolve
// a mount's source), but opens no path under those names. A device name
// in the prefix's dosdevices is what Wine opens \\?\NAME\ by.
func (n *Node) nameVolumes() {
	for letter, target := range map[byte]string{'c': "../drive_c", 'z': "/"} {
		name := fmt.Sprintf("volume{00000000-0000-0000-0000-0000000000%02x}", letter-'a'+'A')
		if err := os.Symlink(target, filepath.Join(n.prefix, "dosdevices", name)); err != nil {
			n.t.Fatal(err)
		}
	}
}

// setHostBuild makes the prefix report HostBuild and a UBR value, as
// Windows Server does: Wine reads its version from these values when no
// version is configured.
func (n *Node) setHostBuild() {
	reg := strings.Join([]string{
		"Windows Registry Editor Version 5.00",
		"",
		`[HKEY_LOCAL_MACHINE\Software\Microsoft\Windows NT\CurrentVersion]`,
		`"CurrentVersion"="10.0"`,
		fmt.Sprintf(`"CurrentBuild"="%d"`, hostBuild),
		fmt.Sprintf(`"CurrentBuildNumber"="%d"`, hostBuild),
		`"CSDVersion"=""`,
		fmt.Sprintf(`"CurrentMajorVersionNumber"=dword:%08x`, 10),
		fmt.Sprintf(`"CurrentMinorVersionNumber"=dword:%08x`, 0),
		fmt.Sprintf(`"UBR"=dword:%08x`, hostUBR),
		"",
	}, "\r\n")
	file := filepath.Join(n.prefix, "drive_c", "node.reg")
	if err := os.WriteFile(file, []byte(reg), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if out, err := n.Run(`C:\windows\regedit.exe`, "/S", `C:\node.reg`); err != nil {
		n.t.Fatalf("set the host build: %v\n%s", err, out)
	}
}

// Run runs a Windows program of the node to its end and returns its
// output (stdout, then stderr); a non-zero exit is an error.
func (n *Node) Run(exe string, args ...string) (string, error) {
	stdout, stderr, err := n.Exec("", nil, exe, args...)
	return stdout + stderr, err
}

// Exec runs a Windows program of the node to its end, in the Linux
// directory dir ("" for the test's), with env added to its environment; a
// non-zero exit is an error.
func (n *Node) Exec(dir string, env []string, exe string, args ...string) (stdout, stderr string, err error) {
	return n.ExecStdin(nil, dir, env, exe, args...)
}

// ExecStdin is Exec with stdin as the program's standard input.
func (n *Node) ExecStdin(stdin io.Reader, dir string, env []string, exe string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := winetest.Command(ctx, n.t, n.prefix, exe, args...)
	cmd.Stdin = stdin
	cmd.Dir = dir
	cmd.Env = append(cmd.Env, env...)
	var o, e syncbuffer.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	code, err := winetest.ExitCode(cmd.Run())
	if err == nil && code != 0 {
		err = fmt.Errorf("exit status %d", code)
	}
	if ctx.Err() != nil {
		// What each of the node's processes was waiting in, for a program
		// that did not end.
		err = fmt.Errorf("%w (not ended in time; the node's processes: %s)", err, n.threadStates())
	}
	if err != nil {
		err = fmt.Errorf("%s %s: %w", exe, strings.Join(args, " "), err)
	}
	return o.String(), e.String(), err
}

// threadStates lists the node's processes by name and pid, with the kernel
// function each thread waits in (wchan) and how many wait there.
func (n *Node) threadStates() string {
	var b strings.Builder
	for _, pid := range n.Processes("") {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		name, _, _ := strings.Cut(string(cmdline), "\x00")
		waits := map[string]int{}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
		for _, t := range tasks {
			w, _ := os.ReadFile(t)
			waits[cmp.Or(string(w), "running")]++
		}
		fmt.Fprintf(&b, "\n  %s (pid %d): %v", name, pid, waits)
	}
	return b.String()
}

// Crictl runs crictl.exe against containerd.exe's CRI, as the kubelet's
// runtime endpoint, and returns its stdout and stderr.
func (n *Node) Crictl(args ...string) (stdout, stderr string, err error) {
	return n.CrictlStdin(nil, args...)
}

// CrictlStdin is Crictl with stdin as crictl.exe's standard input.
func (n *Node) CrictlStdin(stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	args = append([]string{"--runtime-endpoint", CRIEndpoint, "--image-endpoint", CRIEndpoint, "--timeout", "2m"}, args...)
	return n.ExecStdin(stdin, "", nil, InstallDir+`\crictl.exe`, args...)
}

// PauseImage is the pause image install/'s fragment names, which
// install.ps1 builds and imports.
const PauseImage = "winproc.local/pause:node"

// CRIEndpoint is containerd.exe's default address, as a kubelet on
// Windows names it.
const CRIEndpoint = "npipe:////./pipe/containerd-containerd"

// Ctr runs ctr.exe against the node's containerd.
func (n *Node) Ctr(args ...string) (string, error) {
	return n.Run(InstallDir+`\ctr.exe`, args...)
}

// ContainerdLog and SnapshotterLog are what the services logged so far.
func (n *Node) ContainerdLog() string  { return n.containerdLog.String() }
func (n *Node) SnapshotterLog() string { return n.snapshotterLog.String() }

// startServices starts winproc-snapshotter.exe and containerd.exe with
// their defaults, as the node's services, and waits until both serve.
func (n *Node) startServices() {
	t := n.t
	// A restarted node's log holds the first start's lines: wait for one
	// more.
	const serving = "serving windowsfilter snapshotter and differ"
	before := strings.Count(n.snapshotterLog.String(), serving)
	snapshotter := n.start(&n.snapshotterLog, InstallDir+`\winproc-snapshotter.exe`)
	containerd := n.start(&n.containerdLog, InstallDir+`\containerd.exe`, "--log-level", n.logLevel())
	if n.services == nil {
		t.Cleanup(func() {
			// The node's processes are this test's alone: the prefix is.
			n.killAll()
			for _, c := range n.services {
				c.Wait()
			}
		})
	}
	n.services = append(n.services, snapshotter, containerd)
	n.waitLog(&n.snapshotterLog, serving, before+1)
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := n.Ctr("version")
		if err == nil {
			n.useUpPlaceholder(`\\.\pipe\containerd-containerd.ttrpc`)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd.exe does not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (n *Node) start(log *syncbuffer.Buffer, exe string, args ...string) *exec.Cmd {
	cmd := winetest.Command(context.Background(), n.t, n.prefix, exe, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("start %s: %v", exe, err)
	}
	return cmd
}

// waitLog waits until log holds line count times.
func (n *Node) waitLog(log *syncbuffer.Buffer, line string, count int) {
	n.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for strings.Count(log.String(), line) < count {
		if time.Now().After(deadline) {
			n.t.Fatalf("no %q in a minute", line)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ShimPIDs are the Linux PIDs of the node's running shims.
func (n *Node) ShimPIDs() []int {
	env := []byte("WINEPREFIX=" + n.prefix + "\x00")
	return procscan.Live(func(_ int, cmdline, environ []byte) bool {
		return strings.Contains(string(cmdline), "containerd-shim-winproc-v2.exe") &&
			strings.Contains(string(environ), string(env))
	})
}

// KillShims kills the node's running shims (SIGKILL: the process ends
// without a word, as TerminateProcess ends it) and waits until they are
// gone.
func (n *Node) KillShims() {
	n.t.Helper()
	pids := n.ShimPIDs()
	if len(pids) == 0 {
		n.t.Fatal("no shim is running")
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			n.t.Fatalf("kill shim %d: %v", pid, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(n.ShimPIDs()) > 0 {
		if time.Now().After(deadline) {
			n.t.Fatalf("shims %v still run 30 s after SIGKILL", n.ShimPIDs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *Node) dumpLogsOnFailure() {
	if !n.t.Failed() {
		return
	}
	n.t.Logf("containerd.exe's log:\n%s", tail(n.ContainerdLog(), 400))
	n.t.Logf("winproc-snapshotter.exe's log:\n%s", tail(n.SnapshotterLog(), 30))
	// A shim's panic lands in its bundle (shim/manager).
	panics, _ := filepath.Glob(filepath.Join(n.Path(ContainerdState), "*", "*", "*", "panic.log"))
	for _, p := range panics {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			n.t.Logf("%s:\n%s", p, tail(string(b), 60))
		}
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Background starts a Windows program of the node and returns what stops
// it (and waits for it): a program that runs until it is stopped, as
// `crictl port-forward` does.
func (n *Node) Background(exe string, args ...string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := winetest.Command(ctx, n.t, n.prefix, exe, args...)
	var out syncbuffer.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		n.t.Fatalf("start %s: %v", exe, err)
	}
	var once bool
	stop = func() {
		if once {
			return
		}
		once = true
		// SIGINT first, which Wine turns into the program's CTRL_C:
		// a Wine process killed outright can leave the prefix's
		// wineserver holding what the next program waits for.
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cancel()
			<-done
		}
		cancel()
	}
	n.t.Cleanup(stop)
	return stop
}

// Processes are the Linux PIDs of the node's Windows processes whose
// command line holds name.
func (n *Node) Processes(name string) []int {
	env := []byte("WINEPREFIX=" + n.prefix + "\x00")
	return procscan.Live(func(_ int, cmdline, environ []byte) bool {
		return strings.Contains(string(cmdline), name) && strings.Contains(string(environ), string(env))
	})
}

// useUpPlaceholder makes a first client of pipe, a go-winio ListenPipe
// pipe of containerd.exe: Wine 8 hands that client to the placeholder
// instance, where its writes hang (../shared/DESIGN.md, section 6). The
// shims' events reach containerd through its ttrpc pipe, whose first
// client would otherwise be a shim's.
func (n *Node) useUpPlaceholder(pipe string) {
	if out, err := n.Run(InstallDir+`\shimclient.exe`, "stat", pipe); err != nil {
		n.t.Fatalf("%s: %v\n%s", pipe, err, out)
	}
}
