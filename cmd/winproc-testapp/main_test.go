package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
)

// These tests call run in-process; they use in-memory stdio, loopback TCP and
// a fake console event source, and no t.TempDir, so they also pass when
// cross-compiled and run under Wine.

// runArgs runs args through run with stdin and returns the exit status and
// output.
func runArgs(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string // each in stderr
	}{
		{"no command", nil, 2, []string{"no command", "usage: winproc-testapp [-version] <command>", "serve [-addr host:port]"}},
		{"unknown command", []string{"bogus"}, 2, []string{`unknown command "bogus"`, "usage: winproc-testapp"}},
		{"unknown flag", []string{"-bogus"}, 2, []string{"flag provided but not defined: -bogus", "usage: winproc-testapp"}},
		{"help", []string{"-h"}, 0, []string{"usage: winproc-testapp"}},
		{"exit no status", []string{"exit"}, 2, []string{"want one exit status, got 0 arguments", "usage: winproc-testapp exit N"}},
		{"exit two statuses", []string{"exit", "1", "2"}, 2, []string{"want one exit status, got 2 arguments"}},
		{"exit 256", []string{"exit", "256"}, 2, []string{`invalid exit status "256": want 0..255`}},
		{"exit negative", []string{"exit", "-1"}, 2, []string{"flag provided but not defined: -1"}},
		{"exit plus", []string{"exit", "+1"}, 2, []string{`invalid exit status "+1"`}},
		{"exit word", []string{"exit", "seven"}, 2, []string{`invalid exit status "seven"`}},
		{"echo operand", []string{"echo", "x"}, 2, []string{`unexpected argument "x"`, "usage: winproc-testapp echo"}},
		{"env unknown flag", []string{"env", "-x"}, 2, []string{"flag provided but not defined: -x"}},
		{"console help", []string{"console", "-h"}, 0, []string{"usage: winproc-testapp console [-exit-code N]", "-exit-code"}},
		{"console bad code", []string{"console", "-exit-code", "300"}, 2, []string{"invalid -exit-code 300: want 0..255"}},
		{"console code word", []string{"console", "-exit-code", "x"}, 2, []string{`invalid value "x" for flag -exit-code`}},
		{"burn negative", []string{"burn", "-seconds", "-1"}, 2, []string{"invalid -seconds -1"}},
		{"burn NaN", []string{"burn", "-seconds", "NaN"}, 2, []string{"invalid -seconds NaN"}},
		{"sleep too long", []string{"sleep", "-seconds", "1e7"}, 2, []string{"invalid -seconds 1e+07"}},
		{"sleep operand", []string{"sleep", "5"}, 2, []string{`unexpected argument "5"`, "usage: winproc-testapp sleep -seconds N"}},
		{"alloc negative", []string{"alloc", "-mb", "-1"}, 2, []string{"invalid -mb -1: want 0..16384"}},
		{"serve unknown flag", []string{"serve", "-port", "80"}, 2, []string{"flag provided but not defined: -port", "usage: winproc-testapp serve [-addr host:port]"}},
		{"serve bad addr", []string{"serve", "-addr", "127.0.0.1:99999"}, 1, []string{"winproc-testapp: serve: "}},
		{"get no URL", []string{"get"}, 2, []string{"want one URL, got 0 arguments", "usage: winproc-testapp get URL"}},
		{"get unreachable", []string{"get", "http://127.0.0.1:1/"}, 1, []string{"winproc-testapp: get: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q, want %q in it", stderr, want)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runArgs(t, "", "-version")
	if code != 0 || stdout != "winproc-testapp dev\n" || stderr != "" {
		t.Errorf("-version: %d, %q, %q; want 0, %q, none", code, stdout, stderr, "winproc-testapp dev\n")
	}
}

func TestEcho(t *testing.T) {
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"line", "hello, winproc\n"},
		{"no newline", "a\r\nb"},
		{"3MiB binary", string(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.in, "echo")
			if code != 0 || stderr != "" {
				t.Errorf("exit status %d, stderr %q; want 0, none", code, stderr)
			}
			if stdout != tt.in {
				t.Errorf("stdout: %d bytes, want the %d of stdin", len(stdout), len(tt.in))
			}
		})
	}
}

func TestExit(t *testing.T) {
	for _, tt := range []struct {
		arg  string
		want int
	}{{"0", 0}, {"1", 1}, {"7", 7}, {"007", 7}, {"255", 255}} {
		t.Run(tt.arg, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, "", "exit", tt.arg)
			if code != tt.want || stdout != "" || stderr != "" {
				t.Errorf("exit %s: %d, %q, %q; want %d and no output", tt.arg, code, stdout, stderr, tt.want)
			}
		})
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("WINPROC_TESTAPP_B", "two")
	t.Setenv("WINPROC_TESTAPP_A", "one=1")
	t.Setenv("USERNAME", "ContainerUser")
	t.Chdir("..")
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}

	code, stdout, stderr := runArgs(t, "", "env")
	if code != 0 || stderr != "" {
		t.Fatalf("exit status %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) < 4 {
		t.Fatalf("stdout %q: too few lines", stdout)
	}
	env, tail := lines[:len(lines)-2], lines[len(lines)-2:]
	if want := []string{"cwd=" + cwd, "user=ContainerUser"}; tail[0] != want[0] || tail[1] != want[1] {
		t.Errorf("last lines %q, want %q", tail, want)
	}
	if len(env) != len(os.Environ()) {
		t.Errorf("%d variables, want the %d of os.Environ", len(env), len(os.Environ()))
	}
	for i := 1; i < len(env); i++ {
		if env[i-1] > env[i] {
			t.Errorf("not sorted: %q before %q", env[i-1], env[i])
		}
	}
	if !strings.Contains(stdout, "\nWINPROC_TESTAPP_A=one=1\nWINPROC_TESTAPP_B=two\n") {
		t.Errorf("stdout %q lacks the test variables, in order", stdout)
	}
}

// waitLine waits until out has a whole line starting with prefix and returns
// the rest of that line; it fails the test if done is closed first.
func waitLine(t *testing.T, out fmt.Stringer, prefix string, done <-chan struct{}, timeout time.Duration) string {
	t.Helper()
	rest, found, exited := findLine(out, prefix, done, timeout)
	switch {
	case found:
		return rest
	case exited:
		t.Fatalf("exited before printing %q; stdout %q", prefix, out)
	default:
		t.Fatalf("no %q line after %v; stdout %q", prefix, timeout, out)
	}
	return ""
}

// findLine waits until out has a whole line starting with prefix, done is
// closed, or timeout passes, and returns the rest of the line if found.
func findLine(out fmt.Stringer, prefix string, done <-chan struct{}, timeout time.Duration) (rest string, found, exited bool) {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-done:
			exited = true // read the output once more: it may be there
		default:
		}
		for _, line := range strings.SplitAfter(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok && strings.HasSuffix(rest, "\n") {
				return strings.TrimSuffix(rest, "\n"), true, exited
			}
		}
		if exited || time.Now().After(deadline) {
			return "", false, exited
		}
		select {
		case <-done:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// started is a command running in-process with a fake console.
type started struct {
	events chan os.Signal
	stdout *syncbuffer.Buffer
	stderr *syncbuffer.Buffer
	done   chan struct{} // closed once run has returned code
	code   int
}

func start(t *testing.T, args ...string) *started {
	t.Helper()
	s := &started{events: make(chan os.Signal, 1), stdout: &syncbuffer.Buffer{}, stderr: &syncbuffer.Buffer{}, done: make(chan struct{})}
	p := &program{
		stdin:  strings.NewReader(""),
		stdout: s.stdout,
		stderr: s.stderr,
		notify: func() (<-chan os.Signal, func()) { return s.events, func() {} },
	}
	go func() {
		s.code = p.run(args)
		close(s.done)
	}()
	t.Cleanup(func() {
		// Stop a command the test left waiting.
		select {
		case <-s.done:
			return
		case s.events <- os.Interrupt:
		}
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%q still running after the test", args)
		}
	})
	return s
}

// wait returns the exit status once the command has exited.
func (s *started) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	case <-time.After(10 * time.Second):
		t.Fatalf("still running; stdout %q", s.stdout)
		return 0
	}
}

func TestWaitingCommands(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		event      os.Signal // sent after "ready"; nil for none
		wantCode   int
		wantStdout string // or its start, for prefix
		prefix     bool
	}{
		{"console interrupt", []string{"console"}, os.Interrupt, 0, "ready\ngot CTRL_C_EVENT\n", false},
		{"console terminate", []string{"console"}, syscall.SIGTERM, 0, "ready\ngot CTRL_SHUTDOWN_EVENT\n", false},
		{"console exit code", []string{"console", "-exit-code", "42"}, os.Interrupt, 42, "ready\ngot CTRL_C_EVENT\n", false},
		{"sleep forever", []string{"sleep", "-seconds", "0"}, syscall.SIGTERM, 0, "ready\ngot CTRL_SHUTDOWN_EVENT\n", false},
		{"sleep interrupted", []string{"sleep", "-seconds", "3600"}, os.Interrupt, 0, "ready\ngot CTRL_C_EVENT\n", false},
		{"sleep ends", []string{"sleep", "-seconds", "0.05"}, nil, 0, "ready\n", false},
		{"sleep ignores events", []string{"sleep", "-seconds", "0.5", "-ignore-events"}, os.Interrupt, 0, "ready\ngot CTRL_C_EVENT\n", false},
		{"alloc", []string{"alloc", "-mb", "4"}, os.Interrupt, 0, "holding 4 MiB\nready\ngot CTRL_C_EVENT\n", false},
		{"burn ends", []string{"burn", "-seconds", "0.1"}, nil, 0, "ready\nburned cpu=", true},
		{"burn interrupted", []string{"burn", "-seconds", "3600"}, os.Interrupt, 0, "ready\ngot CTRL_C_EVENT\nburned cpu=", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, tt.args...)
			waitLine(t, s.stdout, "ready", s.done, 10*time.Second)
			if tt.event != nil {
				s.events <- tt.event
			}
			if code := s.wait(t); code != tt.wantCode {
				t.Errorf("exit status %d, want %d", code, tt.wantCode)
			}
			if got := s.stdout.String(); tt.prefix && !strings.HasPrefix(got, tt.wantStdout) || !tt.prefix && got != tt.wantStdout {
				t.Errorf("stdout %q, want %q", got, tt.wantStdout)
			}
			if got := s.stderr.String(); got != "" {
				t.Errorf("stderr %q, want none", got)
			}
		})
	}
}

func TestBurnTakesItsTime(t *testing.T) {
	begin := time.Now()
	s := start(t, "burn", "-seconds", "0.3")
	if code := s.wait(t); code != 0 {
		t.Fatalf("exit status %d", code)
	}
	if took := time.Since(begin); took < 300*time.Millisecond {
		t.Errorf("burn -seconds 0.3 ended after %v", took)
	}
	cpu, err := time.ParseDuration(waitLine(t, s.stdout, "burned cpu=", s.done, time.Second))
	if err != nil || cpu < 75*time.Millisecond {
		t.Errorf("burned %v (%v) of CPU in 300ms", cpu, err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func TestServe(t *testing.T) {
	s := start(t, "serve", "-addr", "127.0.0.1:0")
	addr := waitLine(t, s.stdout, "listening on ", s.done, 10*time.Second)
	host, _ := os.Hostname()

	if code, body := get(t, "http://"+addr+"/"); code != 200 || body != fmt.Sprintf("hello from winproc-testapp (pid %d, host %s)\n", os.Getpid(), host) {
		t.Errorf("GET /: %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("GET /healthz: %d %q", code, body)
	}
	s.events <- os.Interrupt
	if code := s.wait(t); code != 0 {
		t.Errorf("exit status %d after CTRL_C_EVENT, want 0", code)
	}
	lines := strings.Split(s.stdout.String(), "\n")
	if len(lines) != 6 || lines[3] != "stopping: CTRL_C_EVENT" || lines[4] != "exiting with status 0" || lines[5] != "" ||
		!strings.Contains(lines[1], " GET / 200 ") || !strings.Contains(lines[2], " GET /healthz 200 2B ") {
		t.Errorf("stdout %q, want listening, a log line per request, stopping, the exit status", s.stdout)
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("still serving after it stopped")
	}
}

func TestServeExit(t *testing.T) {
	s := start(t, "serve", "-addr", "127.0.0.1:0")
	addr := waitLine(t, s.stdout, "listening on ", s.done, 10*time.Second)
	if code, body := get(t, "http://"+addr+"/exit?code=5"); code != 200 || body != "exiting with status 5\n" {
		t.Errorf("GET /exit?code=5: %d %q", code, body)
	}
	if code := s.wait(t); code != 5 {
		t.Errorf("exit status %d, want 5", code)
	}
	if got := s.stdout.String(); !strings.Contains(got, " GET /exit?code=5 200 22B ") || !strings.HasSuffix(got, "\nexiting with status 5\n") {
		t.Errorf("stdout %q, want the request logged, then exiting", got)
	}
}

func TestServeAddrInUse(t *testing.T) {
	s := start(t, "serve", "-addr", "127.0.0.1:0")
	addr := waitLine(t, s.stdout, "listening on ", s.done, 10*time.Second)
	code, stdout, stderr := runArgs(t, "", "serve", "-addr", addr)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "winproc-testapp: serve: ") {
		t.Errorf("second serve on %s: %d, %q, %q; want 1 and an error", addr, code, stdout, stderr)
	}
}

func TestGet(t *testing.T) {
	s := start(t, "serve", "-addr", "127.0.0.1:0")
	addr := waitLine(t, s.stdout, "listening on ", s.done, 10*time.Second)
	if code, stdout, stderr := runArgs(t, "", "get", "http://"+addr+"/healthz"); code != 0 || stdout != "ok" || stderr != "" {
		t.Errorf("get /healthz: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runArgs(t, "", "get", "http://"+addr+"/missing"); code != 1 || !strings.Contains(stderr, "404 Not Found") {
		t.Errorf("get /missing: %d %q", code, stderr)
	}
}
