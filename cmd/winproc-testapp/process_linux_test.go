//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
)

// These tests run winproc-testapp as a real process: natively, and as the
// Windows executable under Wine, stopped with signals the way a container
// runtime stops it (Wine turns SIGINT into CTRL_C_EVENT).

const pkg = "github.com/winproc/winproc/cmd/winproc-testapp"

// launcher makes commands that run the program; the binary is built once in
// setup, for all of a launcher's cases.
type launcher struct {
	name  string
	setup func(t *testing.T) func(ctx context.Context, t *testing.T, args ...string) *exec.Cmd
	// ready bounds the wait for a first line: the first Wine process in a
	// prefix takes a while to start.
	ready time.Duration
}

var launchers = []launcher{
	{name: "native", ready: 10 * time.Second, setup: func(t *testing.T) func(context.Context, *testing.T, ...string) *exec.Cmd {
		exe := filepath.Join(t.TempDir(), "winproc-testapp")
		if b, err := exec.Command("go", "build", "-o", exe, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		return func(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, exe, args...)
		}
	}},
	{name: "wine", ready: 60 * time.Second, setup: func(t *testing.T) func(context.Context, *testing.T, ...string) *exec.Cmd {
		prefix := winetest.Prefix(t)
		exe := winetest.BuildExe(t, pkg)
		return func(ctx context.Context, t *testing.T, args ...string) *exec.Cmd {
			return winetest.Command(ctx, t, prefix, exe, args...)
		}
	}},
}

// proc is a started process whose stdout the test watches.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncbuffer.Buffer
	exited         chan struct{} // closed once Wait has returned err
	err            error
}

func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stdout: &syncbuffer.Buffer{}, stderr: &syncbuffer.Buffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
			if t.Failed() {
				// How it ended (a signal shows as "signal: ...").
				t.Logf("%s ended: %v; stderr %q", cmd.Path, p.err, p.stderr)
			}
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}

// wait returns the exit status once the process has exited.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(timeout):
		t.Fatalf("still running after %v; stdout %q, stderr %q", timeout, p.stdout, p.stderr)
	}
	code, err := winetest.ExitCode(p.err)
	if err != nil {
		t.Fatalf("%v; stdout %q, stderr %q", err, p.stdout, p.stderr)
	}
	return code
}

func TestProcess(t *testing.T) {
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			r := &testappRun{l: l, command: l.setup(t)}
			t.Run("exit 7", r.processExit7)
			t.Run("bad flag", r.processBadFlag)
			t.Run("echo", r.processEcho)
			t.Run("env", r.processEnv)
			stops := []consoleStop{{syscall.SIGINT, "CTRL_C_EVENT"}}
			if l.name == "native" {
				// Wine ends a process on SIGTERM without a console event.
				stops = append(stops, consoleStop{syscall.SIGTERM, "CTRL_SHUTDOWN_EVENT"})
			}
			for _, stop := range stops {
				t.Run("console "+stop.sig.String(), func(t *testing.T) { r.processConsole(t, stop) })
				t.Run("serve "+stop.sig.String(), func(t *testing.T) { r.processServe(t, stop) })
			}
			t.Run("console SIGINT 200 times", r.processConsoleRepeated)
			t.Run("serve exit", r.processServeExit)
		})
	}
}

// testappRun is the test app as one launcher starts it.
type testappRun struct {
	l       launcher
	command func(context.Context, *testing.T, ...string) *exec.Cmd
}

// newCmd is the test app with args. Each case gets its own context:
// CommandContext kills a process a failed case leaves behind.
func (r *testappRun) newCmd(t *testing.T, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return r.command(ctx, t, args...)
}

// consoleStop is a signal and the console event the test app gets for it.
type consoleStop struct {
	sig  syscall.Signal
	want string
}

// processExit7 checks that the test app exits with the status it is given.
func (r *testappRun) processExit7(t *testing.T) {
	t.Parallel()
	p := startProc(t, r.newCmd(t, "exit", "7"))
	if code := p.wait(t, r.l.ready); code != 7 {
		t.Errorf("exit status %d, want 7 (stderr %q)", code, p.stderr)
	}
}

// processBadFlag checks that the test app prints its usage on stderr and exits 2 on an unknown flag.
func (r *testappRun) processBadFlag(t *testing.T) {
	t.Parallel()
	p := startProc(t, r.newCmd(t, "-bogus"))
	if code := p.wait(t, r.l.ready); code != 2 {
		t.Errorf("exit status %d, want 2", code)
	}
	if !strings.Contains(p.stderr.String(), "usage: winproc-testapp") || p.stdout.String() != "" {
		t.Errorf("stdout %q, stderr %q; want usage on stderr only", p.stdout, p.stderr)
	}
}

// processEcho checks that the test app copies stdin to stdout.
func (r *testappRun) processEcho(t *testing.T) {
	t.Parallel()
	cmd := r.newCmd(t, "echo")
	in := "hello\r\nfrom stdin\nno newline"
	cmd.Stdin = strings.NewReader(in)
	p := startProc(t, cmd)
	if code := p.wait(t, r.l.ready); code != 0 || p.stdout.String() != in {
		t.Errorf("exit status %d, stdout %q; want 0, %q (stderr %q)", code, p.stdout, in, p.stderr)
	}
}

// processEnv checks that the test app prints its environment, working directory and user.
func (r *testappRun) processEnv(t *testing.T) {
	t.Parallel()
	cmd := r.newCmd(t, "env")
	cmd.Dir = t.TempDir()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, "WINPROC_TESTAPP_PROBE=a b=c")
	p := startProc(t, cmd)
	if code := p.wait(t, r.l.ready); code != 0 {
		t.Fatalf("exit status %d (stderr %q)", code, p.stderr)
	}
	out := p.stdout.String()
	lines := strings.Split(strings.TrimRight(out, "\r\n"), "\n")
	if !strings.Contains(out, "\nWINPROC_TESTAPP_PROBE=a b=c\n") || len(lines) < 3 {
		t.Fatalf("stdout %q lacks the variable the test set", out)
	}
	cwd, user := lines[len(lines)-2], lines[len(lines)-1]
	if !strings.HasPrefix(cwd, "cwd=") || !strings.HasSuffix(cwd, filepath.Base(cmd.Dir)) {
		t.Errorf("cwd line %q, want the directory %s", cwd, cmd.Dir)
	}
	if !strings.HasPrefix(user, "user=") {
		t.Errorf("last line %q, want user=", user)
	}
}

// processConsoleRepeated stops the test app with SIGINT 200 times in a row:
// about 1 graceful exit in 80 after a console event hung or crashed in
// Wine's exit without the exit library
// (build/wine/wineexit.c): 200 in a row catch that with 92% odds.
// Not parallel: alone, a run takes some 50 ms under Wine; beside
// the other cases, whose ends wait for the wineserver to exit,
// ten times that.
func (r *testappRun) processConsoleRepeated(t *testing.T) {
	// A process kept running through the loop holds the prefix's
	// wineserver: on a loaded machine the server's exit once idle raced
	// the next run's connect ("recvmsg: Connection reset by peer"). The
	// cleanup of startProc ends it.
	holder := startProc(t, r.newCmd(t, "sleep", "-seconds", "600"))
	waitLine(t, holder.stdout, "ready", holder.exited, r.l.ready)
	resent := false
	for i := 0; i < 200 && !t.Failed(); i++ {
		p := startProc(t, r.newCmd(t, "console", "-exit-code", "3"))
		waitLine(t, p.stdout, "ready", p.exited, r.l.ready)
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		// Wine now and then takes a SIGINT without running the
		// control handler (shim/emulation doc.go): not the exit
		// this case is about, so once, the event is sent again.
		if _, got, _ := findLine(p.stdout, "got CTRL_C_EVENT", p.exited, 5*time.Second); !got && !resent {
			resent = true
			t.Logf("run %d: no console event 5 s after SIGINT (stdout %q): sending it again", i, p.stdout)
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
		}
		if code := p.wait(t, 10*time.Second); code != 3 {
			t.Errorf("run %d: exit status %d, want 3 (stdout %q, stderr %q)", i, code, p.stdout, p.stderr)
		}
	}
}

// processServeExit checks that the test app exits with the status GET /exit names.
func (r *testappRun) processServeExit(t *testing.T) {
	t.Parallel()
	p := startProc(t, r.newCmd(t, "serve", "-addr", "127.0.0.1:0"))
	addr := waitLine(t, p.stdout, "listening on ", p.exited, r.l.ready)
	if code, body := get(t, "http://"+addr+"/exit?code=9"); code != 200 || body != "exiting with status 9\n" {
		t.Errorf("GET /exit?code=9: %d %q", code, body)
	}
	if code := p.wait(t, 10*time.Second); code != 9 {
		t.Errorf("exit status %d, want 9 (stderr %q)", code, p.stderr)
	}
}

// processConsole checks that the test app ends on the console event a signal makes, with the exit status it is given.
func (r *testappRun) processConsole(t *testing.T, stop consoleStop) {
	t.Parallel()
	p := startProc(t, r.newCmd(t, "console", "-exit-code", "3"))
	waitLine(t, p.stdout, "ready", p.exited, r.l.ready)
	if err := p.cmd.Process.Signal(stop.sig); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 3 {
		t.Errorf("exit status %d, want 3 (stderr %q)", code, p.stderr)
	}
	if want := "ready\ngot " + stop.want + "\n"; p.stdout.String() != want {
		t.Errorf("stdout %q, want %q", p.stdout, want)
	}
}

// processServe checks that the test app serves, and stops on the console event a signal makes.
func (r *testappRun) processServe(t *testing.T, stop consoleStop) {
	t.Parallel()
	p := startProc(t, r.newCmd(t, "serve", "-addr", "127.0.0.1:0"))
	addr := waitLine(t, p.stdout, "listening on ", p.exited, r.l.ready)
	if code, body := get(t, "http://"+addr+"/"); code != 200 || !strings.HasPrefix(body, "hello from winproc-testapp (pid ") {
		t.Errorf("GET /: %d %q", code, body)
	}
	if err := p.cmd.Process.Signal(stop.sig); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit status %d, want 0 (stderr %q)", code, p.stderr)
	}
	out := p.stdout.String()
	if !strings.Contains(out, " GET / 200 ") || !strings.HasSuffix(out, "\nstopping: "+stop.want+"\nexiting with status 0\n") {
		t.Errorf("stdout %q, want the request logged, then stopping: %s and the exit status", out, stop.want)
	}
}
