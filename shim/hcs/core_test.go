package hcs

import (
	"context"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/hcs/schema2"
)

// The core against the fake binding: operations, notifications and
// handles, without the backend around it.

func testCore(t *testing.T) (*fakeAPI, *computeCore) {
	t.Helper()
	a := newFakeAPI()
	listeners := hcsEvents.len()
	t.Cleanup(func() {
		a.computeCore.bg.Wait()
		a.hcs.wg.Wait()
		// Every handle the test opened is closed, every listener gone.
		if n := a.hcs.open(); n != 0 {
			t.Errorf("%d HCS handles left open", n)
		}
		if n := hcsEvents.len(); n != listeners {
			t.Errorf("%d notification listeners left", n-listeners)
		}
		for _, m := range a.hcs.misused() {
			t.Errorf("HCS handle misused: %s", m)
		}
	})
	return a, a.computeCore
}

var testDoc = &schema2.ComputeSystem{Owner: Owner, SchemaVersion: &schema2.V21, Container: &schema2.Container{}}

// An operation HCS completes after the call returned: run waits for it.
func TestCoreOperationCompletesLater(t *testing.T) {
	a, c := testCore(t)
	release := a.hold("start")
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	done := make(chan error, 1)
	go func() { done <- sys.Start(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Start returned %v before HCS completed it", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A context that ends during an operation cancels it; the core still
// waits for HCS to finish with it before closing the handle.
func TestCoreOperationCanceled(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	defer a.hold("start")()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	err = sys.Start(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v", err)
	}
	calls := a.callList()
	if calls[len(calls)-1] != "cancel" {
		t.Errorf("calls %q, want the operation cancelled", calls)
	}
}

// The result document's messages join HCS's error.
func TestCoreResultDetail(t *testing.T) {
	a, c := testCore(t)
	a.failOperation("create", syscall.Errno(0xC0370101))
	_, err := c.createContainer(context.Background(), "s", testDoc)
	if !errors.Is(err, syscall.Errno(0xC0370101)) || !strings.Contains(err.Error(), "fake HCS failed create") {
		t.Errorf("createContainer = %v", err)
	}
}

// The system's exit arrives by notification; a notification after Close
// reaches no one, and Wait says the handle was closed.
func TestCoreSystemNotifications(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	fs := a.existing["s"]
	waited := make(chan error, 1)
	go func() { waited <- sys.Wait() }()
	fs.stop(syscall.Errno(0xC0370106))
	if err := <-waited; !errors.Is(err, syscall.Errno(0xC0370106)) {
		t.Errorf("Wait = %v, want the exit status", err)
	}
	sys.Close()

	sys2, err := c.createContainer(context.Background(), "t", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	keys := append([]uintptr(nil), a.existing["t"].keys...)
	if err := sys2.Close(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		hcsEvents.deliver(k, eventSystemExited, `{"Status":0}`)
	}
	if err := sys2.Wait(); !errors.Is(err, errHandleClosed) {
		t.Errorf("Wait after Close = %v", err)
	}
	if err := sys2.Close(); !errors.Is(err, errHandleClosed) {
		t.Errorf("a second Close = %v", err)
	}
	if err := sys2.Start(context.Background()); !coreFacts(err).AlreadyClosed {
		t.Errorf("Start after Close = %v", err)
	}
}

// HCS going away ends every wait as unavailable.
func TestCoreServiceDisconnect(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	for _, k := range a.existing["s"].keys {
		hcsEvents.deliver(k, eventServiceDisconnect, "")
	}
	if err := sys.Wait(); !errdefs.IsUnavailable(classify("wait", err, coreFacts(err))) {
		t.Errorf("Wait = %v", err)
	}
}

// A dead shim's delete opens the system again: a system already stopped
// is seen stopped at once, a running one is seen stopping later.
func TestCoreReopen(t *testing.T) {
	a, c := testCore(t)
	first, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	first.Close() // the shim died
	opened, err := c.openContainer(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- opened.Wait() }()
	if err := opened.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("Wait = %v", err)
	}
	opened.Close()

	again, err := c.openContainer(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	done := make(chan error, 1)
	go func() { done <- again.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Wait of a stopped system = %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("a system stopped before it was opened is not seen stopped")
	}
	if _, err := c.openContainer(context.Background(), "gone"); !coreFacts(err).NotExist {
		t.Errorf("open of a missing system = %v", err)
	}
	_ = a
}

// A process that exits before its callback is set is seen exited through
// its properties; one that exits later, through its notification.
func TestCoreProcessExit(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	p, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "x", CreateStdOutPipe: true})
	if err != nil {
		t.Fatal(err)
	}
	fp := a.existing["s"].procs[0]
	// Exited before the callback: the fake drops the notification, as
	// HCS would have sent it to no one.
	fp.mu.Lock()
	fp.code = 7
	close(fp.exitedCh)
	fp.mu.Unlock()
	p.Close()

	p2, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "y"})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	a.existing["s"].procs[1].exit(3, nil)
	if err := p2.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, err := p2.ExitCode(); code != 3 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	if err := p2.Kill(context.Background()); !coreFacts(err).AlreadyStopped {
		t.Errorf("Kill after the exit = %v", err)
	}
	_, out, _, err := p2.Stdio()
	if err != nil || out != nil {
		t.Errorf("Stdio of a process without pipes = %v, %v", out, err)
	}
	if _, _, _, err := p2.Stdio(); err == nil {
		t.Error("the pipes were handed over twice")
	}
}

// The early exit: a process HCS reports exited in its properties.
func TestCoreProcessExitedBeforeCallback(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	// The process exits while the create operation is still running.
	release := a.hold("createProcess")
	go func() {
		for {
			a.mu.Lock()
			fs := a.existing["s"]
			a.mu.Unlock()
			fs.mu.Lock()
			n := len(fs.procs)
			fs.mu.Unlock()
			if n > 0 {
				fs.procs[0].mu.Lock()
				fs.procs[0].code = 9
				close(fs.procs[0].exitedCh)
				fs.procs[0].mu.Unlock()
				release()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	p, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "x"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, _ := p.ExitCode(); code != 9 {
		t.Errorf("ExitCode = %d, want 9 from the properties", code)
	}
}

// Container Credential Guard: the instance is added and read back; a
// failed read removes it again.
func TestCoreCredentialGuard(t *testing.T) {
	a, c := testCore(t)
	st, err := c.addCredentialGuard("s", `{"x":1}`)
	if err != nil || st.Cookie != "cookie-s" || st.CredentialSpec != `{"x":1}` {
		t.Fatalf("addCredentialGuard = %+v, %v", st, err)
	}
	if err := c.removeCredentialGuard("s"); err != nil || len(a.ccg) != 0 {
		t.Errorf("removeCredentialGuard = %v, left %v", err, a.ccg)
	}
	a.failNext("ccgAddInstance", syscall.Errno(0x80070005))
	if _, err := c.addCredentialGuard("s", `{}`); !coreFacts(err).AccessDenied {
		t.Errorf("a refused instance = %v", err)
	}
}

// A console event HCS holds (a servercore process's service manager holds
// it until the process exits) counts as delivered after a while, as runhcs
// signals in the background; Close cancels what is still held and waits
// for it, so no operation outlives the handle.
func TestCoreSignalHeld(t *testing.T) {
	a, c := testCore(t)
	c.signalWait = 50 * time.Millisecond
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	p, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "x"})
	if err != nil {
		t.Fatal(err)
	}
	release := a.hold("signal")
	began := time.Now()
	if err := p.Signal(context.Background(), "CtrlShutdown"); err != nil {
		t.Fatalf("a held console event = %v, want delivered", err)
	}
	if d := time.Since(began); d < 50*time.Millisecond || d > time.Second {
		t.Errorf("Signal returned after %v, want after the 50 ms wait", d)
	}
	// Held, then carried out: the background wait ends by itself.
	release()
	if err := p.Signal(context.Background(), "CtrlC"); err != nil {
		t.Errorf("a console event carried out at once = %v", err)
	}

	// Held until Close, which cancels it.
	a.hold("signal")
	if err := p.Signal(context.Background(), "CtrlShutdown"); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.bg.Wait()
	if calls := a.callList(); calls[len(calls)-2] != "cancel" || calls[len(calls)-1] != "closeProcess 100" {
		t.Errorf("calls %q, want the held event cancelled before the handle closed", calls)
	}
	if err := p.Signal(context.Background(), "CtrlC"); !errors.Is(err, errHandleClosed) {
		t.Errorf("Signal after Close = %v", err)
	}
}

// An operation HCS does not end even when cancelled is left to HCS: its
// caller returns at the deadline, Close does not wait for HCS, and the
// handle the operation is on is closed only once HCS ends it (the fake
// records a handle closed under an operation).
func TestCoreOperationLeftToHCS(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	clear := a.inject(t, "start", fault{deaf: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := sys.Start(ctx); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errOperationLeft) {
		t.Fatalf("Start = %v", err)
	}
	if n := c.operationsLeft(); n != 1 {
		t.Errorf("%d operations left to HCS, want 1", n)
	}
	closed := make(chan struct{})
	go func() {
		sys.Close()
		close(closed)
	}()
	within(t, closed, "Close with an operation left to HCS")
	if slices.Contains(a.callList(), "close s") {
		t.Error("the handle was closed while HCS still works on an operation on it")
	}
	clear()
	c.bg.Wait()
	if !slices.Contains(a.callList(), "close s") || c.operationsLeft() != 0 {
		t.Errorf("the handle is not closed once HCS ended the operation: %q", a.callList())
	}
}

// listSystems lists the running systems of the owner asked for, and a
// failed enumeration names the call.
func TestListSystems(t *testing.T) {
	a := newFakeAPI()
	ctx := context.Background()
	for _, id := range []string{"live", "stopped"} {
		c, err := a.createContainer(ctx, id, &schema2.ComputeSystem{Owner: Owner})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	a.existing["stopped"].stop(nil)
	foreign := newFakeSystem(a.hcs, "foreign")
	foreign.owner = "docker"
	a.existing["foreign"] = foreign
	list, err := a.listSystems(ctx, Owner)
	if err != nil || len(list) != 1 || list[0].Id != "live" || list[0].Owner != Owner {
		t.Errorf("listSystems = %+v, %v", list, err)
	}
	a.failNext("enumerate", syscall.Errno(0x80070005))
	if _, err := a.listSystems(ctx, Owner); err == nil || !strings.Contains(err.Error(), "HcsEnumerateComputeSystems: HRESULT 0x80070005") {
		t.Errorf("a refused enumeration: %v", err)
	}
	a.failOperation("enumerate", errInvalidState)
	if _, err := a.listSystems(ctx, Owner); err == nil || !strings.Contains(err.Error(), "HcsEnumerateComputeSystems") {
		t.Errorf("a failed enumeration: %v", err)
	}
	a.hcs.wg.Wait()
}
