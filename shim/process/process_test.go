package process

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/compute/computetest"
)

// newSystem is a started fake compute system.
func newSystem(t *testing.T) *computetest.System {
	t.Helper()
	ctx := context.Background()
	sys, err := computetest.NewBackend().Create(ctx, "c1", &compute.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return sys.(*computetest.System)
}

func started(t *testing.T, hook ExitHook) (*Process, *computetest.Process) {
	t.Helper()
	return startedWith(t, Hooks{OnExit: hook})
}

func startedWith(t *testing.T, hooks Hooks) (*Process, *computetest.Process) {
	t.Helper()
	sys := newSystem(t)
	p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{}, hooks)
	if err := p.Start(context.Background(), sys); err != nil {
		t.Fatal(err)
	}
	return p, sys.Proc(0)
}

func waitExit(t *testing.T, p *Process) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	code, at, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	if at.IsZero() {
		t.Error("exit time not recorded")
	}
	return code
}

func TestLifecycle(t *testing.T) {
	p, fp := started(t, nil)
	st := p.State()
	if st.Status != task.Status_RUNNING || st.Pid != 1000 {
		t.Fatalf("state after start %+v, want running pid 1000", st)
	}
	if err := p.Start(context.Background(), newSystem(t)); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("double start: %v, want FailedPrecondition", err)
	}
	if err := p.CheckDeletable(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("delete while running: %v, want FailedPrecondition", err)
	}
	fp.Exit(3)
	if code := waitExit(t, p); code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	if st := p.State(); st.Status != task.Status_STOPPED || st.ExitStatus != 3 {
		t.Errorf("state after exit %+v", st)
	}
	if !fp.Closed {
		t.Error("process handle not closed after exit")
	}
	if err := p.CheckDeletable(); err != nil {
		t.Errorf("delete after exit: %v", err)
	}
	if err := p.Kill(context.Background(), uint32(syscall.SIGKILL)); !errdefs.IsNotFound(err) {
		t.Errorf("kill after exit: %v, want NotFound", err)
	}
	// A CloseIO racing the exit has nothing left to close (as runc's shim
	// and runhcs).
	if err := p.CloseStdin(context.Background()); err != nil {
		t.Errorf("close stdin after exit: %v, want nothing to do", err)
	}
}

func TestKillSignals(t *testing.T) {
	tests := []struct {
		name      string
		signal    syscall.Signal
		signalErr error
		wantEvent compute.Signal
		wantKill  bool
		wantErr   func(error) bool
	}{
		// runhcs's numbers (hcsshim internal/signals ValidateWCOW).
		{name: "0 is CTRL_C", signal: 0, wantEvent: compute.CtrlC},
		{name: "1 is CTRL_BREAK", signal: 1, wantEvent: compute.CtrlBreak},
		{name: "2 (SIGINT) is CTRL_CLOSE", signal: syscall.SIGINT, wantEvent: compute.CtrlClose},
		{name: "5 is CTRL_LOGOFF", signal: 5, wantEvent: compute.CtrlLogOff},
		{name: "6 is CTRL_SHUTDOWN", signal: 6, wantEvent: compute.CtrlShutdown},
		{name: "SIGTERM is CTRL_SHUTDOWN", signal: syscall.SIGTERM, wantEvent: compute.CtrlShutdown},
		{name: "SIGKILL terminates", signal: syscall.SIGKILL, wantKill: true},
		{name: "SIGHUP (1 on Linux) is CTRL_BREAK", signal: syscall.SIGHUP, wantEvent: compute.CtrlBreak},
		{name: "3 refused", signal: 3, wantErr: errdefs.IsFailedPrecondition},
		{name: "4 refused", signal: 4, wantErr: errdefs.IsFailedPrecondition},
		{name: "signal 10 (SIGUSR1 on Linux) refused", signal: syscall.Signal(10), wantErr: errdefs.IsFailedPrecondition},
		{name: "events unsupported", signal: syscall.SIGTERM, signalErr: compute.ErrNotSupported, wantErr: errdefs.IsNotImplemented},
		{name: "event delivery fails", signal: syscall.SIGINT, signalErr: errors.New("boom"), wantErr: func(err error) bool { return err != nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, fp := startedWith(t, Hooks{})
			t.Cleanup(func() { fp.Exit(0); waitExit(t, p) })
			fp.SignalErr = tc.signalErr
			err := p.Kill(context.Background(), uint32(tc.signal))
			if tc.wantErr != nil {
				if !tc.wantErr(err) {
					t.Fatalf("Kill: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fp.Killed != tc.wantKill {
				t.Errorf("terminated = %v, want %v", fp.Killed, tc.wantKill)
			}
			if tc.wantEvent != 0 && (len(fp.Signals) != 1 || fp.Signals[0] != tc.wantEvent) {
				t.Errorf("events %v, want [%v]", fp.Signals, tc.wantEvent)
			}
		})
	}
}

func TestKillCreated(t *testing.T) {
	hookRan := false
	p := New("p1", &compute.ProcessSettings{}, Stdio{}, Hooks{OnExit: func(_ context.Context, _ *Process, status uint32) uint32 {
		hookRan = true
		return status
	}})
	if err := p.Kill(context.Background(), uint32(syscall.SIGKILL)); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, p); code != 1 || !hookRan {
		t.Errorf("killed before start: status %d, hook ran %v; want 1, true", code, hookRan)
	}
	if err := p.Start(context.Background(), newSystem(t)); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("start after kill: %v, want FailedPrecondition", err)
	}
}

// The exit hook runs before the exit is final: Wait must not return while
// the init process's compute system is being torn down.
func TestExitHookRunsBeforeWaitReturns(t *testing.T) {
	release := make(chan struct{})
	p, fp := started(t, func(_ context.Context, _ *Process, status uint32) uint32 {
		<-release
		return status + 10
	})
	fp.Exit(1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait returned before the exit hook finished: %v", err)
	}
	if st := p.State(); st.Status != task.Status_RUNNING {
		t.Errorf("status during teardown %v, want still running", st.Status)
	}
	close(release)
	if code := waitExit(t, p); code != 11 {
		t.Errorf("exit status %d, want the hook's 11", code)
	}
}

func TestStartFailureLeavesCreated(t *testing.T) {
	p := New("p1", &compute.ProcessSettings{}, Stdio{}, Hooks{})
	sys := newSystem(t)
	sys.CreateErr = errors.New("no such file")
	err := p.Start(context.Background(), sys)
	if err == nil {
		t.Fatal("start succeeded")
	}
	if st := p.State(); st.Status != task.Status_CREATED {
		t.Errorf("status after failed start %v, want created", st.Status)
	}
}

func TestConsoleAndStdin(t *testing.T) {
	p, fp := started(t, nil)
	t.Cleanup(func() { fp.Exit(0); waitExit(t, p) })
	if err := p.ResizeConsole(context.Background(), 80, 25); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("resize without a console: %v, want FailedPrecondition", err)
	}
	// The backend ends the process's stdin at the stream's EOF; CloseIO
	// never cuts it short (streams_linux_test.go).
	if err := p.CloseStdin(context.Background()); err != nil {
		t.Errorf("close stdin: %v", err)
	}
	fp.Exit(0)
	waitExit(t, p)
	if err := p.CloseStdin(context.Background()); err != nil {
		t.Errorf("close stdin after the exit: %v, want nothing to do", err)
	}
}
