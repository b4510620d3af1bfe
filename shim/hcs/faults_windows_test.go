//go:build windows

package hcs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// coreFaults is the core over the real binding against the node's
// stand-in HCS, whose faults a test sets by faults.h lines.
type coreFaults struct {
	*standinHCS
}

// system creates the system id on a volume of its own, and with start
// starts it.
func (f *coreFaults) system(t *testing.T, id string, start bool) *coreSystem {
	t.Helper()
	sys := f.create(t, id, f.document(t, Owner))
	if start {
		if err := sys.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return sys
}

// returnsWithin runs wait, and reports its result if it returned within d.
func returnsWithin(d time.Duration, wait func() error) (error, bool) {
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// names checks that err names the HCS call and the HRESULT.
func names(t *testing.T, what string, err error, call, hresult string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), call) || !strings.Contains(err.Error(), hresult) {
		t.Errorf("%s = %v; want an error naming %s and %s", what, err, call, hresult)
	}
}

// computecoreFaults are HCS's failures as the stand-in makes them, each
// through the real binding and the core's handling of it.
var computecoreFaults = []struct {
	name, faults string // faults: the faults.h line of the case
	run          func(t *testing.T, f *coreFaults)
}{
	{"HCS gives up", "HcsStartComputeSystem op 800705B4 1", func(t *testing.T, f *coreFaults) {
		err := f.system(t, "fail-start", false).Start(context.Background())
		names(t, "Start", err, "HcsStartComputeSystem", "0x800705B4")
		if !coreFacts(err).Timeout || !errdefs.IsDeadlineExceeded(classify("start", err, coreFacts(err))) {
			t.Errorf("Start = %v; want a timeout, DeadlineExceeded", err)
		}
	}},
	{"an operation that ends only when cancelled", "HcsStartComputeSystem stall 0 1", func(t *testing.T, f *coreFaults) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := f.system(t, "stall-start", false).Start(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "HcsStartComputeSystem") {
			t.Errorf("Start = %v; want the deadline, naming HcsStartComputeSystem", err)
		}
		if d := time.Since(start); d > cancelGrace+5*time.Second {
			t.Errorf("Start returned after %v", d)
		}
	}},
	{"the service disconnects during a create", "HcsCreateComputeSystem call 8037011E 1", func(t *testing.T, f *coreFaults) {
		_, err := f.c.createContainer(context.Background(), "disconnect", f.document(t, Owner))
		names(t, "create", err, "HcsCreateComputeSystem", "0x8037011E")
		if !coreFacts(err).Unavailable || !errdefs.IsUnavailable(classify("create", err, coreFacts(err))) {
			t.Errorf("create = %v; want Unavailable", err)
		}
	}},
	{"a system that exits during its start", "HcsStartComputeSystem exit 80370100 1", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "exit-in-start", false)
		names(t, "Start", sys.Start(context.Background()), "HcsStartComputeSystem", "0x80370100")
		err, ok := returnsWithin(5*time.Second, sys.Wait)
		if !ok || !errors.Is(err, syscall.Errno(0x80370100)) {
			t.Errorf("Wait = %v (returned: %v); want the exit's status HCS_E_TERMINATED_DURING_START", err, ok)
		}
	}},
	{"a terminate refused once with access denied", "HcsTerminateComputeSystem call 80070005 1", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "denied-once", true)
		err := sys.Terminate(context.Background())
		names(t, "Terminate", err, "HcsTerminateComputeSystem", "0x80070005")
		if !errdefs.IsPermissionDenied(classify("terminate", err, coreFacts(err))) {
			t.Errorf("Terminate = %v; want PermissionDenied", err)
		}
		if err := sys.Terminate(context.Background()); err != nil {
			t.Errorf("Terminate again = %v", err)
		}
		if err, ok := returnsWithin(5*time.Second, sys.Wait); !ok || err != nil {
			t.Errorf("Wait = %v (returned: %v) after the retried terminate", err, ok)
		}
	}},
	{"a terminate after the stop", "", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "stopped", true)
		if err := sys.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err, ok := returnsWithin(5*time.Second, sys.Wait); !ok || err != nil {
			t.Fatalf("Wait = %v (returned: %v)", err, ok)
		}
		// HCS_E_SYSTEM_ALREADY_STOPPED while the handle is open (hcsshim
		// internal/hcs/errors.go ErrVmcomputeAlreadyStopped).
		err := sys.Terminate(context.Background())
		names(t, "Terminate", err, "HcsTerminateComputeSystem", "0x80370110")
		if !coreFacts(err).AlreadyStopped {
			t.Errorf("Terminate = %v; want already stopped", err)
		}
		if stopped, err := sys.CheckStopped(context.Background()); !stopped || err != nil {
			t.Errorf("CheckStopped = %v, %v", stopped, err)
		}
	}},
	{"a stop HCS did not announce", "HcsTerminateComputeSystem gone 8037010E 1", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "gone", false)
		err := sys.Terminate(context.Background())
		if err == nil || !coreFacts(err).NotExist || !strings.Contains(err.Error(), "HcsTerminateComputeSystem") {
			t.Errorf("Terminate = %v; want not found, naming HcsTerminateComputeSystem", err)
		}
		if stopped, err := sys.CheckStopped(context.Background()); !stopped || err != nil {
			t.Errorf("CheckStopped = %v, %v; want the system found stopped", stopped, err)
		}
		if err := sys.Wait(); err != nil {
			t.Errorf("Wait = %v after the stop was found", err)
		}
	}},
	{"a stop whose notification is lost", "HcsEventSystemExited lost 0 1", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "lost", true)
		if err := sys.Terminate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := returnsWithin(500*time.Millisecond, sys.Wait); ok {
			t.Fatal("Wait returned with no notification and no question asked")
		}
		if stopped, err := sys.CheckStopped(context.Background()); !stopped || err != nil {
			t.Errorf("CheckStopped = %v, %v; want the system found stopped from its properties", stopped, err)
		}
		if err, ok := returnsWithin(time.Second, sys.Wait); !ok || err != nil {
			t.Errorf("Wait = %v (returned: %v) once the stop was found", err, ok)
		}
	}},
	{"a stop notified twice", "HcsEventSystemExited twice 0 1", func(t *testing.T, f *coreFaults) {
		sys := f.system(t, "twice", true)
		if err := sys.Terminate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err, ok := returnsWithin(5*time.Second, sys.Wait); !ok || err != nil {
			t.Errorf("Wait = %v (returned: %v)", err, ok)
		}
		time.Sleep(100 * time.Millisecond) // the second notification
		if err := sys.Wait(); err != nil {
			t.Errorf("Wait after the second notification = %v", err)
		}
	}},
	{"a stop notified after the handle closed", "HcsEventSystemExited late 0 1", func(t *testing.T, f *coreFaults) {
		listeners := hcsEvents.len()
		sys := f.system(t, "late", true)
		if err := sys.Terminate(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sys.Wait(); !errors.Is(err, errHandleClosed) {
			t.Errorf("Wait after Close = %v; want the handle closed", err)
		}
		time.Sleep(500 * time.Millisecond) // the notification comes, to no listener
		if n := hcsEvents.len(); n != listeners {
			t.Errorf("%d notification listeners after Close, want %d", n, listeners)
		}
	}},
	{"a killed process whose exit is never notified", "HcsEventProcessExited lost 0 1", func(t *testing.T, f *coreFaults) {
		p := f.process(t, "process-lost", "winproc-testapp.exe sleep -seconds 0 -ignore-events")
		if err := p.Kill(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, ok := returnsWithin(500*time.Millisecond, p.Wait); ok {
			t.Fatal("Wait returned with no notification and no question asked")
		}
		if exited, err := p.CheckExited(context.Background()); !exited || err != nil {
			t.Errorf("CheckExited = %v, %v; want the exit read from the properties", exited, err)
		}
		if code, err := p.ExitCode(); code != 1 || err != nil {
			t.Errorf("ExitCode = %d, %v; want 1, the killed process's", code, err)
		}
	}},
	{"a process exit notified twice", "HcsEventProcessExited twice 63 1", func(t *testing.T, f *coreFaults) {
		// Alive a second, so that its callback is set before the exit.
		p := f.process(t, "process-twice", "cmd.exe /c ping -n 2 127.0.0.1 >NUL & exit 3")
		if err, ok := returnsWithin(5*time.Second, p.Wait); !ok || err != nil {
			t.Fatalf("Wait = %v (returned: %v)", err, ok)
		}
		time.Sleep(100 * time.Millisecond) // the second notification, with another code
		if code, err := p.ExitCode(); code != 3 || err != nil {
			t.Errorf("ExitCode = %d, %v; want 3, the first notification's", code, err)
		}
	}},
}

func (f *coreFaults) process(t *testing.T, id, cmdline string) hcsProcess {
	t.Helper()
	sys := f.system(t, id, true)
	p, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: cmdline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestComputecoreFaults runs the core's handling of HCS's failures through
// the binding against the node's stand-in HCS, each fault set by its
// faults.h line (TestComputecoreBindingUnderWine runs this under Wine):
// each HRESULT reaches the caller named with its call and class, an
// operation HCS ends only when cancelled returns at the caller's
// deadline, and a stop or exit whose notification is lost, late or
// doubled is still seen once.
func TestComputecoreFaults(t *testing.T) {
	f := &coreFaults{loadStandin(t)}
	for _, tc := range computecoreFaults {
		t.Run(tc.name, func(t *testing.T) {
			if tc.faults != "" {
				writeFaults(t, tc.faults+"\n")
			}
			tc.run(t, f)
		})
	}
}
