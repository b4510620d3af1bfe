package hcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// coreProcessOf creates a process in a new system id and returns it with
// the fake's side of it. Both close when the test ends.
func coreProcessOf(t *testing.T, a *fakeAPI, c *computeCore, id string, params *schema2.ProcessParameters) (hcsContainer, hcsProcess, *fakeProcess) {
	t.Helper()
	sys, err := c.createContainer(context.Background(), id, testDoc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Close() })
	p, err := sys.CreateProcess(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	a.mu.Lock()
	fs := a.existing[id]
	a.mu.Unlock()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return sys, p, fs.procs[len(fs.procs)-1]
}

// A servercore process whose console handler never returns holds
// CTRL_SHUTDOWN's call, and HCS serializes the calls on a process handle:
// the kill that follows the grace period goes through handles of its
// own, so it is not queued behind the event and the process ends.
func TestCoreKillNotQueuedBehindHeldSignal(t *testing.T) {
	a, c := testCore(t)
	c.signalWait = 20 * time.Millisecond
	_, p, fp := coreProcessOf(t, a, c, "s", &schema2.ProcessParameters{CommandLine: "servercore.exe"})
	a.injectLine(t, "HcsSignalProcess hold 0 1")
	fp.mu.Lock()
	fp.killExits = true
	fp.mu.Unlock()
	// A failing test must not hang in Close, which waits for the event.
	t.Cleanup(func() { fp.exit(0, nil) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := p.Signal(ctx, "CtrlShutdown"); err != nil {
		t.Fatalf("Signal = %v", err)
	}
	if err := p.Kill(ctx); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	exited := make(chan struct{})
	go func() { p.Wait(); close(exited) }()
	within(t, exited, "the exit after a kill behind a held console event")
	if code, _ := p.ExitCode(); code != 1 {
		t.Errorf("exit code %d, want the kill's 1", code)
	}
	if calls := a.callList(); !slices.Contains(calls, "open s") || !slices.Contains(calls, "openProcess s 100") {
		t.Errorf("the kill did not open handles of its own: %q", calls)
	}
}

// A process whose system is gone cannot be killed and needs no kill.
func TestCoreKillSystemGone(t *testing.T) {
	a, c := testCore(t)
	_, p, _ := coreProcessOf(t, a, c, "s", &schema2.ProcessParameters{CommandLine: "x"})
	a.failNext("open", errSystemNotFound)
	if err := p.Kill(context.Background()); !coreFacts(err).AlreadyStopped {
		t.Errorf("Kill with the system gone = %v, want already stopped", err)
	}
}

// HCS's wait for a created process can fail spuriously (E_INVALIDARG on
// Windows Server 2022) with a valid process handle: the process's
// information comes from HcsGetProcessInfo, and it starts with its pipes.
// When that fails too, the create's own error is returned and the
// process is terminated and closed.
func TestCoreCreateProcessSpuriousWaitFailure(t *testing.T) {
	einval := syscall.Errno(0x80070057)
	t.Run("recovered", func(t *testing.T) {
		a, c := testCore(t)
		a.injectLine(t, "HcsCreateProcess spurious 80070057 1")
		_, p, fp := coreProcessOf(t, a, c, "s", &schema2.ProcessParameters{CommandLine: "x", CreateStdOutPipe: true})
		if p.Pid() != fp.pid {
			t.Errorf("Pid = %d, want %d", p.Pid(), fp.pid)
		}
		_, stdout, _, err := p.Stdio()
		if err != nil || stdout == nil {
			t.Fatalf("Stdio = %v, %v", stdout, err)
		}
		go func() {
			io.WriteString(fp.stdoutW, "out")
			fp.stdoutW.Close()
		}()
		if b, err := io.ReadAll(stdout); string(b) != "out" || err != nil {
			t.Errorf("stdout %q, %v", b, err)
		}
		stdout.Close()
		if !slices.Contains(a.callList(), "processInfo 100") {
			t.Errorf("no HcsGetProcessInfo: %q", a.callList())
		}
	})
	t.Run("not recovered", func(t *testing.T) {
		a, c := testCore(t)
		sys, err := c.createContainer(context.Background(), "s", testDoc)
		if err != nil {
			t.Fatal(err)
		}
		defer sys.Close()
		a.failOperation("createProcess", einval)
		a.failOperation("processInfo", syscall.Errno(0x800706BE))
		_, err = sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "x"})
		if !errors.Is(err, einval) {
			t.Errorf("CreateProcess = %v, want the create's own error", err)
		}
		calls := a.callList()
		if tail := calls[len(calls)-2:]; tail[0] != "kill 100" || tail[1] != "closeProcess 100" {
			t.Errorf("the process is not terminated and closed: %q", calls)
		}
	})
}

// Calls that race Close (the CRI's statistics polling during teardown)
// never reach HCS with a handle that closed under them: HCS faults inside
// computecore.dll on one. The fake records any such use.
func TestCoreCloseWaitsForCalls(t *testing.T) {
	a, c := testCore(t)
	for i := 0; i < 20; i++ {
		sys, p, _ := coreProcessOf(t, a, c, fmt.Sprint("s", i), &schema2.ProcessParameters{CommandLine: "x"})
		var wg sync.WaitGroup
		calls := []func() error{
			func() error { _, err := sys.Properties(context.Background(), schema2.PropertyStatistics); return err },
			func() error {
				return sys.Modify(context.Background(), &schema2.ModifySettingRequest{ResourcePath: schema2.ResourceMemoryLimit})
			},
			func() error { return sys.Start(context.Background()) },
			func() error { return p.ResizeConsole(context.Background(), 80, 25) },
			func() error { return p.CloseStdin(context.Background()) },
		}
		for _, call := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for call() == nil {
				}
			}()
		}
		time.Sleep(5 * time.Millisecond)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}
