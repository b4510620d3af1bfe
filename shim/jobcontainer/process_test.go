package jobcontainer

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// Each console event reaches the process through CtrlRoutine with its
// Windows number; one without a handler ends as on a console.
func TestSignal(t *testing.T) {
	for _, tc := range []struct {
		sig   compute.Signal
		event string
	}{
		{compute.CtrlC, "ctrlEvent 0"},
		{compute.CtrlBreak, "ctrlEvent 1"},
		{compute.CtrlClose, "ctrlEvent 2"},
		{compute.CtrlLogOff, "ctrlEvent 5"},
		{compute.CtrlShutdown, "ctrlEvent 6"},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			_, f, s := startedSystem(t)
			p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe sleep"})
			if err := p.Signal(context.Background(), tc.sig); err != nil {
				t.Fatal(err)
			}
			if code := exitCode(t, p); code != 0xC000013A {
				t.Errorf("exit %#x", code)
			}
			if !strings.Contains(strings.Join(f.callList(), "\n"), tc.event) {
				t.Errorf("no %s: %q", tc.event, f.callList())
			}
			if err := p.Signal(context.Background(), tc.sig); !errdefs.IsNotFound(err) {
				t.Errorf("Signal after the exit = %v", err)
			}
		})
	}
	_, _, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	if err := p.Signal(context.Background(), compute.Signal(99)); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Signal(99) = %v", err)
	}
}

func TestKill(t *testing.T) {
	_, f, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	f.failNext("terminateProcess", errorAccessDenied)
	if err := p.Kill(context.Background()); !errdefs.IsPermissionDenied(err) {
		t.Errorf("Kill refused = %v", err)
	}
	if err := p.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, p); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if err := p.Kill(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Kill after the exit = %v", err)
	}
}

// Close before the exit ends the wait (a process without a console runs
// on) and releases the handles.
func TestProcessClose(t *testing.T) {
	_, f, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, p.Wait(), "the wait's end")
	if _, err := p.ExitCode(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitCode = %v", err)
	}
	if err := p.Kill(context.Background()); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Kill after Close = %v", err)
	}
	for _, h := range f.openHandles() {
		if strings.Contains(h, "fakeProc") || strings.Contains(h, "fakeEvent") {
			t.Errorf("handle %s left open", h)
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestExitCodeBeforeExit(t *testing.T) {
	_, _, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	if _, err := p.ExitCode(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitCode = %v", err)
	}
	if p.Pid() == 0 {
		t.Error("no pid")
	}
}

// A Terminal process gets a pseudo console of its size (80x25 when none
// is given), resized on request and closed after the exit; its output
// arrives on Stdout.
func TestTerminal(t *testing.T) {
	_, f, s := startedSystem(t)
	var out syncbuffer.Buffer
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe sleep", Terminal: true, ConsoleWidth: 120, ConsoleHeight: 40, Stdout: &out, Stderr: &out})
	if err := p.ResizeConsole(context.Background(), 100, 30); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(context.Background(), compute.CtrlC); err != nil {
		t.Fatal(err)
	}
	exitCode(t, p)
	calls := strings.Join(f.callList(), "\n")
	for _, want := range []string{"createPseudoConsole 120x40", "resizePseudoConsole 100x30", "closePseudoConsole"} {
		if !strings.Contains(calls, want) {
			t.Errorf("no %s:\n%s", want, calls)
		}
	}
	if err := p.ResizeConsole(context.Background(), 1, 1); !errdefs.IsNotFound(err) {
		t.Errorf("resize after the exit = %v", err)
	}

	// The system stopped with its last process: a new one.
	_, f, s = startedSystem(t)
	q := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	p = run(t, s, &compute.ProcessSettings{CommandLine: "app.exe exit 0", Terminal: true, Stdout: &out})
	exitCode(t, p)
	if !strings.Contains(strings.Join(f.callList(), "\n"), "createPseudoConsole 80x25") {
		t.Error("no default size")
	}
	if err := q.ResizeConsole(context.Background(), 1, 1); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("resize without a console = %v", err)
	}
}

// A shim in a job without breakaway cannot start a process with
// CREATE_BREAKAWAY_FROM_JOB: the error names that cause and its fix, not
// the shim's account; in a job that allows it, or none, the start works.
func TestStartInJobWithoutBreakaway(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags *uint32
		fails bool
	}{
		{"no job", nil, false},
		{"a job without breakaway", ptr(uint32(limitKillOnClose)), true},
		{"a job with breakaway", ptr(uint32(limitBreakawayOK)), false},
		{"a job with silent breakaway", ptr(uint32(limitSilentBreakaway)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, f, s := startedSystem(t)
			f.mu.Lock()
			f.shimJob = tc.flags
			f.mu.Unlock()
			p, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe exit 0", User: `NT AUTHORITY\SYSTEM`})
			if !tc.fails {
				if err != nil {
					t.Fatal(err)
				}
				p.Close()
				return
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("CreateProcess = %v", err)
			}
			for _, want := range []string{"JOB_OBJECT_LIMIT_BREAKAWAY_OK", "CREATE_BREAKAWAY_FROM_JOB", "containerd", "app.exe"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v does not name %s", err, want)
				}
			}
			if strings.Contains(err.Error(), "SYSTEM") {
				t.Errorf("%v blames the shim's account", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Close before the exit of a Terminal process closes its pseudo console,
// which ends the process (ClosePseudoConsole's documentation): it does not
// run on as a process with pipes does, and a system whose last process it
// was stops.
func TestTerminalClose(t *testing.T) {
	_, f, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore", Terminal: true, Stdout: io.Discard})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, p.Wait(), "the wait's end")
	f.mu.Lock()
	proc := f.procs[uint32(p.Pid())]
	exited, code := proc.exited, proc.code
	f.mu.Unlock()
	if !exited || code != 0xC000013A {
		t.Errorf("after Close the process exited %v with %#x; want it ended with its console", exited, code)
	}
	within(t, s.Wait(), "the system's stop")
}
