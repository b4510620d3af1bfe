package hcs

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// started returns a started system with one process created from ps.
func started(t *testing.T, ps *compute.ProcessSettings) (*fakeAPI, compute.System, *fakeSystem, compute.Process, *fakeProcess) {
	t.Helper()
	_, a, sys, fc := created(t)
	if err := sys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := sys.CreateProcess(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	fp := fc.procs[len(fc.procs)-1]
	fc.mu.Unlock()
	return a, sys, fc, p, fp
}

func TestProcessRun(t *testing.T) {
	var stdout, stderr syncbuffer.Buffer
	stdinR, stdinW := io.Pipe()
	ps := &compute.ProcessSettings{
		CommandLine: "cmd /c echo hi", WorkingDirectory: `C:\`, Env: []string{"A=1"},
		Stdin: stdinR, Stdout: &stdout, Stderr: &stderr,
	}
	_, _, _, p, fp := started(t, ps)
	if p.Pid() != fp.pid {
		t.Errorf("Pid = %d, want %d", p.Pid(), fp.pid)
	}
	if c := fp.config; !c.CreateStdInPipe || !c.CreateStdOutPipe || !c.CreateStdErrPipe || c.Environment["A"] != "1" || c.CommandLine != "cmd /c echo hi" {
		t.Errorf("process document %+v", c)
	}
	if _, err := p.ExitCode(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitCode while running = %v", err)
	}

	// stdin reaches the process; its end closes the process's stdin.
	go func() {
		io.WriteString(stdinW, "typed")
		stdinW.Close()
	}()
	got, err := io.ReadAll(fp.stdinR)
	if err != nil || string(got) != "typed" {
		t.Errorf("process stdin %q, %v", got, err)
	}
	fp.mu.Lock()
	if fp.stdinClose != 1 {
		t.Errorf("HCS CloseStdin called %d times", fp.stdinClose)
	}
	fp.mu.Unlock()

	// Output written before the exit is all copied before Wait closes.
	io.WriteString(fp.stdoutW, "hello ")
	go func() {
		io.WriteString(fp.stdoutW, "world")
		io.WriteString(fp.stderrW, "oops")
		fp.stdoutW.Close()
		fp.stderrW.Close()
	}()
	fp.exit(3, nil)
	within(t, p.Wait(), "process Wait")
	if stdout.String() != "hello world" || stderr.String() != "oops" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if code, err := p.ExitCode(); code != 3 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	// An exited process is NotFound for what needs it running.
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Kill":   func() error { return p.Kill(ctx) },
		"Signal": func() error { return p.Signal(ctx, compute.CtrlC) },
		"Resize": func() error { return p.ResizeConsole(ctx, 1, 1) },
	} {
		if err := call(); !errdefs.IsNotFound(err) {
			t.Errorf("%s after exit = %v, want NotFound", name, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
}

func TestProcessDrainBounded(t *testing.T) {
	var stdout syncbuffer.Buffer
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x", Stdout: &stdout})
	io.WriteString(fp.stdoutW, "before exit")
	// A grandchild keeps stdout open after the process exits.
	start := time.Now()
	fp.exit(0, nil)
	within(t, p.Wait(), "Wait despite a held stdout")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("Wait closed after %v, before the drain timeout", d)
	}
	if stdout.String() != "before exit" {
		t.Errorf("stdout %q", stdout.String())
	}
	// The backend closed its end: the grandchild's writes fail.
	if _, err := fp.stdoutW.Write([]byte("late")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after the drain = %v", err)
	}
}

func TestProcessWaitsForOutput(t *testing.T) {
	var stdout syncbuffer.Buffer
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x", Stdout: &stdout})
	fp.exit(0, nil)
	notWithin(t, p.Wait(), 50*time.Millisecond, "Wait before the output ended")
	io.WriteString(fp.stdoutW, "tail")
	fp.stdoutW.Close()
	within(t, p.Wait(), "Wait after the output ended")
	if stdout.String() != "tail" {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestProcessNoStreams(t *testing.T) {
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x"})
	if c := fp.config; c.CreateStdInPipe || c.CreateStdOutPipe || c.CreateStdErrPipe {
		t.Errorf("pipes requested for no streams: %+v", c)
	}
	fp.exit(0, nil)
	within(t, p.Wait(), "Wait")
}

func TestProcessKill(t *testing.T) {
	a, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x"})
	if err := p.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, p.Wait(), "Wait after Kill")
	if code, err := p.ExitCode(); code != 1 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	_ = a
	_ = fp

	// A process HCS reports as already stopped, before the backend saw its
	// exit: NotFound.
	a, _, _, p, fp = started(t, &compute.ProcessSettings{CommandLine: "x"})
	a.failNext("kill", syscall.Errno(0x8037011F))
	if err := p.Kill(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Kill of a stopped process = %v", err)
	}
	a.failNext("kill", syscall.Errno(0x490))
	if err := p.Kill(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Kill of a missing process = %v", err)
	}
	fp.exit(0, nil)
}

// Console control events go to HCS by name (HcsSignalProcess); one the
// process already exited for is NotFound.
func TestProcessSignal(t *testing.T) {
	a, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x"})
	for _, s := range []compute.Signal{compute.CtrlC, compute.CtrlBreak, compute.CtrlShutdown, compute.CtrlClose, compute.CtrlLogOff} {
		if err := p.Signal(context.Background(), s); err != nil {
			t.Errorf("Signal(%v) = %v", s, err)
		}
	}
	fp.mu.Lock()
	if want := []string{"CtrlC", "CtrlBreak", "CtrlShutdown", "CtrlClose", "CtrlLogOff"}; !reflect.DeepEqual(fp.signals, want) || fp.kills != 0 {
		t.Errorf("HCS got %q and %d kills, want %q and none", fp.signals, fp.kills, want)
	}
	fp.signalExits = true
	fp.mu.Unlock()
	if err := p.Signal(context.Background(), compute.Signal(9)); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Signal(9) = %v", err)
	}
	a.failOperation("signal", syscall.Errno(0x80070005))
	if err := p.Signal(context.Background(), compute.CtrlC); !errdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "CTRL_C_EVENT") {
		t.Errorf("a refused Signal = %v", err)
	}
	// The process handles CTRL_SHUTDOWN_EVENT and exits 0.
	if err := p.Signal(context.Background(), compute.CtrlShutdown); err != nil {
		t.Fatal(err)
	}
	within(t, p.Wait(), "exit after the console event")
	if code, err := p.ExitCode(); code != 0 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	if err := p.Signal(context.Background(), compute.CtrlC); !errdefs.IsNotFound(err) {
		t.Errorf("Signal after the exit = %v", err)
	}
}

func TestProcessResizeConsole(t *testing.T) {
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x", Terminal: true, ConsoleWidth: 80, ConsoleHeight: 25, Stdout: io.Discard})
	if !reflect.DeepEqual(fp.config.ConsoleSize, []int32{25, 80}) || !fp.config.EmulateConsole {
		t.Errorf("console %+v", fp.config)
	}
	if err := p.ResizeConsole(context.Background(), 120, 40); err != nil {
		t.Fatal(err)
	}
	fp.mu.Lock()
	if len(fp.resized) != 1 || fp.resized[0] != [2]uint16{120, 40} {
		t.Errorf("resized %v", fp.resized)
	}
	fp.mu.Unlock()
	fp.stdoutW.Close()
	fp.exit(0, nil)

	_, _, _, p, fp = started(t, &compute.ProcessSettings{CommandLine: "x"})
	if err := p.ResizeConsole(context.Background(), 1, 1); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ResizeConsole without a console = %v", err)
	}
	fp.exit(0, nil)
}

func TestProcessCloseBeforeExit(t *testing.T) {
	var stdout syncbuffer.Buffer
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x", Stdout: &stdout})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, p.Wait(), "Wait after Close")
	if _, err := p.ExitCode(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitCode of a closed process = %v", err)
	}
	if err := p.Kill(context.Background()); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Kill after Close = %v", err)
	}
	fp.mu.Lock()
	if fp.kills != 0 {
		t.Error("Close killed the process")
	}
	fp.mu.Unlock()
}

func TestProcessExitCodeLost(t *testing.T) {
	_, _, _, p, fp := started(t, &compute.ProcessSettings{CommandLine: "x"})
	fp.exit(0, errors.New("lost communication with compute service"))
	within(t, p.Wait(), "Wait")
	if _, err := p.ExitCode(); !errdefs.IsUnavailable(err) {
		t.Errorf("ExitCode = %v", err)
	}
}

func TestProcessCreateErrors(t *testing.T) {
	_, a, sys, _ := created(t)
	if _, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("empty command line: %v", err)
	}
	if _, err := sys.CreateProcess(context.Background(), nil); !errdefs.IsInvalidArgument(err) {
		t.Errorf("nil settings: %v", err)
	}
	notFound := syscall.Errno(2) // ERROR_FILE_NOT_FOUND: the program is missing
	a.failNext("createProcess", notFound)
	_, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "missing.exe"})
	if !errors.Is(err, notFound) || errdefs.IsNotFound(err) {
		t.Errorf("CreateProcess of a missing program = %v (must not look like a gone system)", err)
	}
	a.failOperation("createProcess", &stdioError{errors.New("no pipes")})
	if _, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "x", Stdout: io.Discard}); err == nil {
		t.Error("CreateProcess hid the stdio failure")
	}
	calls := a.callList()
	if tail := calls[len(calls)-2:]; tail[0] != "kill 100" || tail[1] != "closeProcess 100" {
		t.Errorf("a process whose stdio failed is not killed and closed: %q", calls)
	}
}

// When the system stops under a running process whose exit HCS does not
// report, the process is killed (as runhcs does), which ends it.
func TestProcessKilledWhenSystemStops(t *testing.T) {
	_, _, fc, p, fp := startedWithSystem(t)
	fc.stop(nil)
	within(t, p.Wait(), "process Wait after its system stopped")
	fp.mu.Lock()
	if fp.kills != 1 {
		t.Errorf("killed %d times", fp.kills)
	}
	fp.mu.Unlock()
	if code, err := p.ExitCode(); code != 1 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
}

// A process that not even Kill ends once its system stopped is given up:
// Wait closes with an Unavailable exit.
func TestProcessLostWhenSystemStops(t *testing.T) {
	_, _, fc, p, fp := startedWithSystem(t)
	fp.mu.Lock()
	fp.killExits = false
	fp.mu.Unlock()
	fc.stop(nil)
	within(t, p.Wait(), "process Wait after its system stopped")
	if _, err := p.ExitCode(); !errdefs.IsUnavailable(err) {
		t.Errorf("ExitCode = %v", err)
	}
}

func startedWithSystem(t *testing.T) (*fakeAPI, compute.System, *fakeSystem, compute.Process, *fakeProcess) {
	return started(t, &compute.ProcessSettings{CommandLine: "x"})
}
