package hcs

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// The backend's contract under faults that stop, or fail to stop,
// compute systems and processes (docs/architecture.md, "Under faults").

// wantNamed fails the test unless err names the HCS function call and
// the HRESULT hr (none when 0), and is of class (nil: of no class).
func wantNamed(t *testing.T, err error, call string, hr syscall.Errno, class func(error) bool) {
	t.Helper()
	switch {
	case err == nil:
		t.Fatalf("no error, want %s's", call)
	case !strings.Contains(err.Error(), call):
		t.Errorf("%q does not name %s", err, call)
	case hr != 0 && !strings.Contains(err.Error(), fmt.Sprintf("HRESULT 0x%08X", uint32(hr))):
		t.Errorf("%q does not carry HRESULT 0x%08X", err, uint32(hr))
	case class != nil && !class(err):
		t.Errorf("%q is not of its class", err)
	}
}

// A create that fails, or is given up on, leaves nothing: the system HCS
// made is terminated and closed, the scratch released, the record removed.
func TestFaultFailedCreateLeavesNothing(t *testing.T) {
	cases := []struct {
		name   string
		faults map[string]fault
		call   string
		hr     syscall.Errno
		class  func(error) bool
	}{
		{"timed out, the system made", map[string]fault{"create": {op: hrTimeout}}, "HcsCreateComputeSystem", hrTimeout, errdefs.IsDeadlineExceeded},
		{"already exists, unseen by the open", map[string]fault{"create": {call: hrAlreadyExists}}, "HcsCreateComputeSystem", hrAlreadyExists, errdefs.IsAlreadyExists},
		{"access denied", map[string]fault{"create": {call: hrAccessDenied}}, "HcsCreateComputeSystem", hrAccessDenied, errdefs.IsPermissionDenied},
		{"service disconnect", map[string]fault{"create": {op: hrDisconnect}}, "HcsCreateComputeSystem", hrDisconnect, errdefs.IsUnavailable},
		{"exited during create", map[string]fault{"create": {exit: true, status: hrUnexpectedExit, op: hrTerminatedInBoot}}, "HcsCreateComputeSystem", hrTerminatedInBoot, nil},
		{"stalled to the deadline", map[string]fault{"create": {stall: true}}, "HcsCreateComputeSystem", 0, errdefs.IsDeadlineExceeded},
		{"stalled past the cancel", map[string]fault{"create": {deaf: true}}, "HcsCreateComputeSystem", 0, errdefs.IsDeadlineExceeded},
		// Not an HCS function: the silo's job object refuses with ERROR_ACCESS_DENIED.
		{"affinity refused", map[string]fault{"affinity": {call: errorAccessDenied}}, "pin its silo", 0, errdefs.IsPermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, a := testBackend(t)
			var clears []func()
			deadline := answerDeadline
			for name, f := range tc.faults {
				clears = append(clears, a.inject(t, name, f))
				deadline = min(deadline, deadlineOf(f))
			}
			s := createSettings()
			s.Resources.CPUAffinity = []compute.CPUGroupAffinity{{Mask: 3}}
			err, took, returned := callBy(t, deadline, func(ctx context.Context) error { return discardNew(b.Create(ctx, "c", s)) })
			if !returned {
				t.FailNow()
			}
			wantNamed(t, err, tc.call, tc.hr, tc.class)
			if took > deadline+faultSlack {
				t.Errorf("Create returned %v after a deadline of %v", took, deadline)
			}
			if tc.hr == 0 && tc.call == "HcsCreateComputeSystem" && slices.Contains(a.layerCalls(), "unprepare") && a.operationsLeft() > 0 {
				t.Error("the scratch was released while HCS still works on the create")
			}
			for _, clear := range clears {
				clear()
			}
			settled(t, b, a)
			if got, want := a.layerCalls(), []string{"activate", "prepare", "mountPath", "unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
				t.Errorf("layer calls %q, want %q", got, want)
			}
			if rec, _ := b.records.read("c"); rec != nil {
				t.Errorf("record left: %+v", rec)
			}
		})
	}
}

// A system left by a crashed create is not the next create's: Create of
// its id is AlreadyExists before any layer is touched, and the system is
// left for the shim's delete or a sweep of orphans.
func TestFaultCreateAfterCrashedCreate(t *testing.T) {
	b, a := testBackend(t)
	crashed := newFakeSystem(a.hcs, "c")
	a.existing["c"] = crashed
	_, err := b.Create(context.Background(), "c", createSettings())
	if !errdefs.IsAlreadyExists(err) {
		t.Fatalf("Create = %v", err)
	}
	if calls := a.layerCalls(); len(calls) != 0 {
		t.Errorf("layer calls %q", calls)
	}
	if crashed.isStopped() {
		t.Error("the system of a crashed create was stopped by another create")
	}
	crashed.stop(nil)
	settled(t, b, a)
}

// A terminate that HCS refuses, or accepts and does not carry out, or
// whose exit notification does not come, is carried on by the backend
// until the system stops, and listed meanwhile; a system the shim closes
// meanwhile has what it held released once it stops.
func TestFaultTerminateCarriedOn(t *testing.T) {
	cases := []struct {
		name  string
		fake  string
		fault fault
		hr    syscall.Errno // Terminate's own error; 0: accepted
		class func(error) bool
		// clears: the system stops only once the fault clears.
		clears bool
	}{
		{"refused: operation timeout", "terminate", fault{call: hrTimeout}, hrTimeout, errdefs.IsDeadlineExceeded, true},
		{"refused: access denied", "terminate", fault{call: hrAccessDenied}, hrAccessDenied, errdefs.IsPermissionDenied, true},
		{"refused: service disconnect", "terminate", fault{call: hrDisconnect}, hrDisconnect, errdefs.IsUnavailable, true},
		{"accepted, failing later", "terminate", fault{op: hrAccessDenied}, 0, nil, true},
		{"accepted, never carried out", "terminate", fault{deaf: true}, 0, nil, true},
		{"exit notification lost", "systemExited", fault{lost: true}, 0, nil, false},
		{"exit notification late", "systemExited", fault{late: true}, 0, nil, false},
		{"exit notification twice", "systemExited", fault{twice: true}, 0, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaultPod(t)
			clear := f.a.inject(t, tc.fake, tc.fault)
			err := f.sys.Terminate(context.Background())
			if tc.hr != 0 {
				wantNamed(t, err, "HcsTerminateComputeSystem", tc.hr, tc.class)
			} else if err != nil {
				t.Fatalf("Terminate = %v", err)
			}
			if tc.clears {
				notWithin(t, f.sys.Wait(), 100*time.Millisecond, "a stop under the fault")
				ts := f.b.Terminations()
				if len(ts) != 1 || ts[0].ID != "ctr" || ts[0].Attempts < 2 {
					t.Fatalf("Terminations = %+v, want ctr tried again", ts)
				}
				if tc.hr != 0 {
					wantNamed(t, ts[0].LastError, "HcsTerminateComputeSystem", tc.hr, tc.class)
				}
				// ...and says so in its record, for winproc doctor.
				ps, err := PendingTerminations(f.b.records.dir)
				if err != nil || len(ps) != 1 || ps[0].ID != "ctr" || ps[0].Attempts < 2 || (tc.hr != 0) != (ps[0].LastError != nil) {
					t.Fatalf("PendingTerminations = %+v, %v", ps, err)
				}
				// The shim's teardown gives up waiting: the backend carries on.
				if err := f.sys.Close(); err != nil {
					t.Errorf("Close of a system being terminated = %v", err)
				}
				if ts := f.b.Terminations(); len(ts) != 1 || !ts[0].Closed {
					t.Errorf("Terminations after Close = %+v", ts)
				}
				clear()
			}
			within(t, f.sys.Wait(), "the stop")
			if err := f.sys.ExitError(); err != nil {
				t.Errorf("ExitError = %v", err)
			}
			clear()
			f.remove(t)
			f.b.bg.Wait()
			if ps, err := PendingTerminations(f.b.records.dir); len(ps) != 0 || err != nil {
				t.Errorf("PendingTerminations after the stop = %+v, %v", ps, err)
			}
		})
	}
}

// A system whose state HCS cannot tell (the service is gone) can still be
// removed: the terminate is carried on until the backend gives up, the
// shim forgets it at once, and what is left is logged and recorded; once
// HCS is back, the shim's delete removes it.
func TestFaultUnknownStateRemoved(t *testing.T) {
	f := newFaultPod(t)
	var clears []func()
	for _, name := range []string{"terminate", "properties", "kill", "open"} {
		clears = append(clears, f.a.inject(t, name, fault{call: hrDisconnect}))
	}
	err := f.sys.Terminate(context.Background())
	wantNamed(t, err, "HcsTerminateComputeSystem", hrDisconnect, errdefs.IsUnavailable)
	f.p.Close()
	if err := f.sys.Close(); err != nil {
		t.Errorf("Close = %v, want the system forgotten", err)
	}
	f.b.bg.Wait() // the backend gives up after terminateGiveUp
	if n := f.a.hcs.open(); n != 0 {
		t.Errorf("%d handles open after the backend gave up", n)
	}
	if rec, _ := f.b.records.read("ctr"); rec == nil {
		t.Error("the record of what was left is gone")
	}
	for _, clear := range clears {
		clear()
	}

	// containerd's delete of the task, once HCS answers again.
	f.deleteAfterShim(t)
}

// The delete of a system HCS no longer finds (HCS_E_SYSTEM_NOT_FOUND)
// succeeds and releases what the system held; a delete refused (access
// denied) succeeds once the fault clears.
func TestFaultDelete(t *testing.T) {
	t.Run("system not found", func(t *testing.T) {
		f := newFaultPod(t)
		for _, name := range []string{"terminate", "properties"} {
			f.a.inject(t, name, fault{call: hrSystemNotFound})
		}
		err := f.sys.Terminate(context.Background())
		wantNamed(t, err, "HcsTerminateComputeSystem", hrSystemNotFound, errdefs.IsNotFound)
		within(t, f.sys.Wait(), "the stop of a system HCS no longer finds")
		f.p.Close()
		if err := f.sys.Close(); err != nil {
			t.Errorf("Close = %v", err)
		}
		if rec, _ := f.b.records.read("ctr"); rec != nil {
			t.Errorf("record left: %+v", rec)
		}
		f.fc.stop(nil) // HCS had indeed lost it
	})
	t.Run("access denied", func(t *testing.T) {
		f := newFaultPod(t)
		clear := f.a.inject(t, "open", fault{call: hrAccessDenied})
		_, err := f.b.Open(context.Background(), "ctr")
		wantNamed(t, err, "HcsOpenComputeSystem", hrAccessDenied, errdefs.IsPermissionDenied)
		clear()
		f.p.Close()
		f.sys.Close() // the shim died: its handle went with it
		f.deleteAfterShim(t)
	})
}

// A system that exits during its create or start, or before a terminate
// HCS refuses for it, is seen stopped at once: the failed call is NotFound
// and Wait closes, whether or not its exit notification comes.
func TestFaultSystemExits(t *testing.T) {
	cases := []struct {
		name   string
		faults map[string]fault
		do     func(ctx context.Context, f *faultPod) error
		call   string
		hr     syscall.Errno
		unexp  bool // ExitError is an unexpected stop
	}{
		{"during create", map[string]fault{"create": {exit: true}}, nil, "HcsStartComputeSystem", 0, false},
		{"during start", map[string]fault{"start": {exit: true, status: hrUnexpectedExit, op: hrTerminatedInBoot}}, nil, "HcsStartComputeSystem", hrTerminatedInBoot, true},
		{"before a terminate: HCS_E_INVALID_STATE", map[string]fault{"terminate": {call: hrInvalidState}, "systemExited": {lost: true}}, func(ctx context.Context, f *faultPod) error {
			f.fc.stop(nil)
			return f.sys.Terminate(ctx)
		}, "HcsTerminateComputeSystem", hrInvalidState, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, a := testBackend(t)
			for name, flt := range tc.faults {
				a.inject(t, name, flt)
			}
			sys, err := b.Create(context.Background(), "ctr", createSettings())
			if err != nil {
				t.Fatal(err)
			}
			f := &faultPod{b: b, a: a, sys: sys, fc: a.existing["ctr"]}
			do := tc.do
			if do == nil {
				do = func(ctx context.Context, f *faultPod) error { return f.sys.Start(ctx) }
			}
			err = do(context.Background(), f)
			wantNamed(t, err, tc.call, tc.hr, errdefs.IsNotFound)
			within(t, sys.Wait(), "the stop")
			if err := sys.ExitError(); (err != nil) != tc.unexp {
				t.Errorf("ExitError = %v", err)
			}
			if err := sys.Close(); err != nil {
				t.Errorf("Close = %v", err)
			}
			settled(t, b, a)
			if rec, _ := b.records.read("ctr"); rec != nil {
				t.Errorf("record left: %+v", rec)
			}
		})
	}
}

// A killed process whose exit notification is lost, late or doubled, or
// that exited by itself unannounced, is seen exited all the same, with
// its exit code.
func TestFaultProcessExits(t *testing.T) {
	cases := []struct {
		name  string
		fault fault
		self  bool // the process exits by itself (code 7) before the kill
		code  int
	}{
		{"notification lost", fault{lost: true}, false, 1},
		{"notification late", fault{late: true}, false, 1},
		{"notification twice", fault{twice: true}, false, 1},
		{"exited unannounced", fault{lost: true}, true, 7},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaultPod(t)
			clear := f.a.inject(t, "processExited", tc.fault)
			err := error(nil)
			if tc.self {
				f.fp.exit(7, nil)
				err = f.p.Kill(context.Background())
				wantNamed(t, err, "HcsOpenProcess", errProcessStopped, errdefs.IsNotFound)
			} else if err = f.p.Kill(context.Background()); err != nil {
				t.Fatalf("Kill = %v", err)
			}
			within(t, f.p.Wait(), "the exit")
			if code, err := f.p.ExitCode(); code != tc.code || err != nil {
				t.Errorf("ExitCode = %d, %v; want %d", code, err, tc.code)
			}
			clear()
			f.remove(t)
		})
	}
	t.Run("kill refused: service disconnect", func(t *testing.T) {
		f := newFaultPod(t)
		clear := f.a.inject(t, "kill", fault{op: hrDisconnect})
		err := f.p.Kill(context.Background())
		wantNamed(t, err, "HcsTerminateProcess", hrDisconnect, errdefs.IsUnavailable)
		clear()
		if err := f.p.Kill(context.Background()); err != nil {
			t.Fatalf("Kill once the fault cleared = %v", err)
		}
		within(t, f.p.Wait(), "the exit")
		f.remove(t)
	})
}
