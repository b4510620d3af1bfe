//go:build windows

package jobcontainer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
)

// These tests run real processes in real job objects through the binding:
// on Windows, and under Wine, which has job objects (but no layer
// functions, volume mount points or working symbolic links). The rootfs is
// dirRootfs: a directory holding this test binary as app.exe, where the
// backend would mount the scratch's volume.

// dirRootfs stands in for volumeRootfs: what it leaves unproven is the
// layer functions and SetVolumeMountPoint, which the Linux tests check
// against a fake.
type dirRootfs struct{ exe string }

func (d dirRootfs) mount(_ context.Context, _ compute.Layers, _ uint64, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := os.ReadFile(d.exe)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "app.exe"), b, 0o755)
}

func (dirRootfs) unmount(_ context.Context, _, dir string) (bool, error) {
	return true, removeTree(dir)
}

// removeTree removes dir entry by entry: Go's os.RemoveAll fails under
// Wine.
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			if err := removeTree(p); err != nil {
				return err
			}
			continue
		}
		if err := os.Remove(p); err != nil {
			return err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// realBackend is the backend over Windows, the rootfs a directory.
func realBackend(t *testing.T) *Backend {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	root := winetest.TempDir(t)
	b := newBackend(windowsHost{}, Options{MountRoot: filepath.Join(root, "hpc"), StateDir: filepath.Join(root, "state")})
	b.rootfs = dirRootfs{exe}
	t.Cleanup(func() {
		removeTree(filepath.Join(root, "hpc"))
		removeTree(filepath.Join(root, "state"))
	})
	return b
}

func uniqueID(t *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// container creates and starts a container with settings s (a HostProcess
// container inheriting the test's user when nil).
func container(t *testing.T, b *Backend, s *compute.Settings) compute.System {
	t.Helper()
	if s == nil {
		s = &compute.Settings{HostProcess: &compute.HostProcess{InheritUser: true}}
	}
	s.Layers = compute.Layers{Scratch: `C:\scratch`, Parents: []string{`C:\base`}}
	sys, err := b.Create(context.Background(), uniqueID(t), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sys.Terminate(context.Background()) == nil {
			select {
			case <-sys.Wait():
			case <-time.After(10 * time.Second):
			}
		}
		sys.Close()
	})
	if err := sys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sys
}

func start(t *testing.T, sys compute.System, ps *compute.ProcessSettings) compute.Process {
	t.Helper()
	ps.Env = append(ps.Env, helperEnv+"=1")
	var stderr syncbuffer.Buffer
	if ps.Stderr == nil {
		ps.Stderr = &stderr
	}
	p, err := sys.CreateProcess(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill(context.Background())
		p.Close()
		if t.Failed() && stderr.String() != "" {
			t.Logf("stderr of %q:\n%s", ps.CommandLine, stderr.String())
		}
	})
	return p
}

func waitExit(t *testing.T, p compute.Process) int {
	t.Helper()
	select {
	case <-p.Wait():
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not exit")
	}
	code, err := p.ExitCode()
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func waitLine(t *testing.T, c <-chan string, prefix string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c:
			if !ok {
				t.Fatalf("output ended before %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-deadline:
			t.Fatalf("no %q", prefix)
		}
	}
}

// The exit code is the program's own (no shell in between), all 32 bits,
// and the container stops with its last process.
func TestUnderWineExitCodes(t *testing.T) {
	b := realBackend(t)
	for _, code := range []uint32{0, 3, 255, 0xC000013A, 0xC0000005} {
		t.Run(fmt.Sprintf("%#x", code), func(t *testing.T) {
			sys := container(t, b, nil)
			p := start(t, sys, &compute.ProcessSettings{CommandLine: fmt.Sprintf("app.exe exit %#x", code)})
			if got := waitExit(t, p); got != int(code) {
				t.Errorf("exit code %#x, want %#x", got, code)
			}
			select {
			case <-sys.Wait():
			case <-time.After(10 * time.Second):
				t.Fatal("the container did not stop with its last process")
			}
			if err := sys.ExitError(); err != nil {
				t.Errorf("ExitError = %v", err)
			}
		})
	}
}

func TestUnderWineMissingProgram(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	_, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `agent.exe --serve`})
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), `"agent.exe"`) {
		t.Fatalf("CreateProcess = %v, want NotFound naming agent.exe", err)
	}
}

// The process's environment is its user's, with the mount point and PATH,
// and its directory is under the mount point; the program was found there
// by a bare name.
func TestUnderWineEnvironment(t *testing.T) {
	b := realBackend(t)
	sys := container(t, b, nil)
	mp := hostprocess.Join(b.mountRoot, sys.ID())
	var out syncbuffer.Buffer
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app env`, WorkingDirectory: `work\dir`, Env: []string{`A_VAR=%CONTAINER_SANDBOX_MOUNT_POINT%\conf`}, Stdout: &out})
	if code := waitExit(t, p); code != 0 {
		t.Fatalf("exit %d\n%s", code, out.String())
	}
	got := strings.ToLower(out.String())
	for _, want := range []string{
		`container_sandbox_mount_point=` + mp + `\`,
		`path=` + mp + `;`,
		`a_var=` + mp + `\conf`,
		`cwd=` + mp + `\work\dir`,
		`systemroot=`, // the profile's
	} {
		if !strings.Contains(got, strings.ToLower(want)) {
			t.Errorf("environment without %q:\n%s", want, out.String())
		}
	}
}

func TestUnderWineStdin(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	var out syncbuffer.Buffer
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe echo`, Stdin: strings.NewReader("through the job\n"), Stdout: &out})
	if code := waitExit(t, p); code != 0 || out.String() != "through the job\n" {
		t.Errorf("exit %d, stdout %q", code, out.String())
	}
}

// The job knows its processes, the grandchild too, and accounts for them.
func TestUnderWineStatsAndPids(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	r, w := io.Pipe()
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe spawn`, Stdout: w})
	out := lines(r)
	child := waitLine(t, out, "child ")
	grandchild := waitLine(t, out, "grandchild ")
	list, err := sys.ProcessList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]bool{}
	for _, i := range list {
		pids[strconv.Itoa(int(i.Pid))] = true
	}
	for _, pid := range []string{strconv.Itoa(p.Pid()), strings.Fields(child)[1], strings.Fields(grandchild)[1]} {
		if !pids[pid] {
			t.Errorf("pid %s not in the job's process list %+v", pid, list)
		}
	}
	st, err := sys.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.ContainerStartTime.IsZero() || st.Uptime < 0 || st.Timestamp.IsZero() {
		t.Errorf("stats %+v", st)
	}
	t.Logf("stats %+v, processes %+v", st, list)
}

// Kill ends the process with exit code 1; the container stops.
func TestUnderWineKill(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe sleep`})
	if err := p.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p); code != 1 {
		t.Errorf("exit %d", code)
	}
	if err := p.Kill(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Kill after the exit = %v", err)
	}
}

// A console event reaches the process's handler through CtrlRoutine: Go's
// runtime turns CTRL_C into os.Interrupt and CTRL_SHUTDOWN into SIGTERM.
func TestUnderWineConsoleEvents(t *testing.T) {
	b := realBackend(t)
	for _, sig := range []compute.Signal{compute.CtrlC, compute.CtrlBreak, compute.CtrlShutdown, compute.CtrlClose} {
		t.Run(sig.String(), func(t *testing.T) {
			sys := container(t, b, nil)
			r, w := io.Pipe()
			p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe console 7`, Stdout: w})
			waitLine(t, lines(r), "ready")
			if err := p.Signal(context.Background(), sig); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, p); code != 7 {
				t.Errorf("exit %d, want 7 (the handler's)", code)
			}
		})
	}
}

// Shutdown sends CTRL_SHUTDOWN_EVENT to every process of the job.
func TestUnderWineShutdown(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	r, w := io.Pipe()
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe console 5`, Stdout: w})
	waitLine(t, lines(r), "ready")
	if err := sys.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p); code != 5 {
		t.Errorf("exit %d", code)
	}
	select {
	case <-sys.Wait():
	case <-time.After(10 * time.Second):
		t.Fatal("no stop after the shutdown")
	}
}

// Terminate ends the process and what it started: TerminateJobObject.
func TestUnderWineTerminate(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	r, w := io.Pipe()
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe spawn`, Stdout: w})
	out := lines(r)
	waitLine(t, out, "grandchild ")
	if err := sys.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p); code != 1 {
		t.Errorf("exit %d", code)
	}
	select {
	case <-sys.Wait():
	case <-time.After(10 * time.Second):
		t.Fatal("no stop after Terminate")
	}
}

// The job dies with its last handle: closing the container while its
// process, child and grandchild run ends all three, as when the shim dies.
// The delete subcommand's cleanup then releases the rootfs.
func TestUnderWineKillOnJobClose(t *testing.T) {
	b := realBackend(t)
	sys := container(t, b, nil)
	r, w := io.Pipe()
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe spawn`, Stdout: w})
	out := lines(r)
	var pids []uint32
	for _, l := range []string{waitLine(t, out, "child "), waitLine(t, out, "grandchild ")} {
		n, _ := strconv.Atoi(strings.Fields(l)[1])
		pids = append(pids, uint32(n))
	}
	var procs []windows.Handle
	for _, pid := range append(pids, uint32(p.Pid())) {
		h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, pid)
		if err != nil {
			t.Fatalf("open process %d: %v", pid, err)
		}
		procs = append(procs, h)
	}
	err := sys.Close()
	if !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Close of a running container = %v", err)
	}
	for i, h := range procs {
		if ev, err := windows.WaitForSingleObject(h, 5000); ev != windows.WAIT_OBJECT_0 {
			t.Errorf("process %d still runs after the job's last handle closed: %v", i, err)
		}
		windows.CloseHandle(h)
	}
	<-p.Wait()
	mp := hostprocess.Join(b.mountRoot, sys.ID())
	if _, err := os.Stat(filepath.Join(mp, "app.exe")); err != nil {
		t.Fatalf("the rootfs of a container closed while running is gone: %v", err)
	}
	// The delete subcommand's cleanup (shim/manager stopSystem). Windows
	// drops a job's name with its last handle: Open says NotFound. Wine
	// keeps it until its processes are torn down, a moment later: Open
	// then gives a system with no process left.
	o, err := b.Open(context.Background(), sys.ID())
	switch {
	case err == nil:
		o.Terminate(context.Background())
		select {
		case <-o.Wait():
		case <-time.After(10 * time.Second):
			t.Fatal("the opened job did not stop")
		}
		if err := o.Close(); err != nil {
			t.Errorf("Close of the opened job = %v", err)
		}
	case !errdefs.IsNotFound(err):
		t.Fatalf("Open after the job's last handle closed = %v", err)
	}
	if _, err := os.Stat(mp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the rootfs is left after the cleanup: %v", err)
	}
	if _, ok := b.held(t, sys.ID()); ok {
		t.Error("the record is left after the cleanup")
	}
}

// The users: a service account through LogonUser, a group through a
// temporary user, and SYSTEM refused when the shim is not SYSTEM. Wine's
// LogonUserW is a stub whose token no other call takes, and its user and
// group functions succeed without effect: under Wine these reach
// CreateEnvironmentBlock, which refuses the token.
func TestUnderWineUsers(t *testing.T) {
	b := realBackend(t)
	for _, user := range []string{`NT AUTHORITY\LOCAL SERVICE`, `NT AUTHORITY\NetworkService`, `Users`} {
		t.Run(user, func(t *testing.T) {
			sys := container(t, b, &compute.Settings{HostProcess: &compute.HostProcess{}})
			if isWine() {
				_, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `app.exe env`, User: user})
				if !errors.Is(err, windows.ERROR_INVALID_HANDLE) || !strings.Contains(err.Error(), "CreateEnvironmentBlock") {
					t.Errorf("CreateProcess as %s under Wine = %v, want CreateEnvironmentBlock refusing Wine's stub token", user, err)
				}
				return
			}
			var out syncbuffer.Buffer
			p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe env`, User: user, Stdout: &out})
			if code := waitExit(t, p); code != 0 {
				t.Errorf("exit %d", code)
			}
			if !strings.Contains(out.String(), "CONTAINER_SANDBOX_MOUNT_POINT=") {
				t.Errorf("environment %s", out.String())
			}
		})
	}
	t.Run("SYSTEM", func(t *testing.T) {
		sys := container(t, b, &compute.Settings{HostProcess: &compute.HostProcess{}})
		_, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `app.exe exit 0`, User: `NT AUTHORITY\SYSTEM`, Env: []string{helperEnv + "=1"}})
		var tok windows.Token
		windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_QUERY, &tok)
		defer tok.Close()
		u, uerr := tok.GetTokenUser()
		if uerr != nil {
			t.Fatal(uerr)
		}
		if u.User.Sid.String() == systemSID {
			if err != nil {
				t.Errorf("CreateProcess as SYSTEM, as SYSTEM = %v", err)
			}
			return
		}
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), u.User.Sid.String()) {
			t.Errorf("CreateProcess as SYSTEM from %s = %v", u.User.Sid.String(), err)
		}
	})
}

// A Terminal process runs on a pseudo console: what it writes arrives on
// Stdout through the console, and the console can be resized. Wine 8
// makes the pseudo console but starts the process on the caller's own
// console, so there only the start, the exit code and the console's
// closing are shown.
func TestUnderWineTerminal(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	if isWine() {
		p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe exit 9`, Terminal: true, Stdout: io.Discard})
		if code := waitExit(t, p); code != 9 {
			t.Errorf("exit %d", code)
		}
		return
	}
	r, w := io.Pipe()
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe console 9`, Terminal: true, ConsoleWidth: 100, ConsoleHeight: 30, Stdout: w})
	out := lines(r)
	waitLine(t, out, "ready")
	if err := p.ResizeConsole(context.Background(), 120, 40); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(context.Background(), compute.CtrlC); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p); code != 9 {
		t.Errorf("exit %d", code)
	}
}
