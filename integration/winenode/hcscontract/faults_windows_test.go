//go:build windows

package hcscontract

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

const (
	hcsTerminatedDuringStart = syscall.Errno(0x80370100)
	callbackFaults           = 0x400 // the callback contexts of these tests, one per case
)

// systemState is the State of the system's properties.
func (h *hcs) systemState(t *testing.T, sys uintptr) string {
	t.Helper()
	doc, err := h.run(t, func(op uintptr) error { return h.call("HcsGetComputeSystemProperties", sys, op, 0) })
	if err != nil {
		t.Fatalf("HcsGetComputeSystemProperties: %v", err)
	}
	_, state, _ := strings.Cut(doc, `"State":"`)
	state, _, _ = strings.Cut(state, `"`)
	return state
}

// quiet checks that ctx hears nothing for 500 ms.
func quiet(t *testing.T, what string, ctx uintptr) {
	t.Helper()
	time.Sleep(500 * time.Millisecond)
	if got := eventDataOf(ctx); len(got) != 0 {
		t.Errorf("%s: notified %q", what, got)
	}
}

// TestFaultKinds runs each kind of faults.h the node's stand-in takes
// beyond call, op and stall, as HCS shows the failure it stands for
// (shim/hcs's fake of the binding speaks the same kinds). The HRESULTs
// are HCS's (winerror.h HCS_E_*; hcsshim internal/hcs/errors.go).
func TestFaultKinds(t *testing.T) {
	h := load(t)
	terminate := func(sys uintptr) error {
		_, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", sys, op, 0) })
		return err
	}
	// started starts a system with a callback of context ctx.
	started := func(t *testing.T, id string, ctx uintptr) uintptr {
		sys := h.create(t, id, document(volume(t), false), true)
		if err := h.call("HcsSetComputeSystemCallback", sys, 0, ctx, eventCallback); err != nil {
			t.Fatal(err)
		}
		return sys
	}
	cases := []struct {
		name, faults string
		run          func(t *testing.T, ctx uintptr)
	}{
		{"exit: the system exits during its start", "HcsStartComputeSystem exit 80370100 1", func(t *testing.T, ctx uintptr) {
			sys := h.create(t, "fault-exit", document(volume(t), false), false)
			if err := h.call("HcsSetComputeSystemCallback", sys, 0, ctx, eventCallback); err != nil {
				t.Fatal(err)
			}
			if _, err := h.run(t, func(op uintptr) error { return h.call("HcsStartComputeSystem", sys, op, 0) }); !errors.Is(err, hcsTerminatedDuringStart) {
				t.Errorf("HcsStartComputeSystem: %v, want HCS_E_TERMINATED_DURING_START", err)
			}
			eventually(t, "the exit notification with the start's status", func() bool {
				got := eventDataOf(ctx)
				return len(got) == 1 && strings.Contains(got[0], `"Status":-2143878912`)
			})
			if s := h.systemState(t, sys); s != "Stopped" {
				t.Errorf("State %q, want Stopped", s)
			}
		}},
		{"gone: the system stopped unannounced", "HcsTerminateComputeSystem gone 8037010E 1", func(t *testing.T, ctx uintptr) {
			sys := started(t, "fault-gone", ctx)
			if err := terminate(sys); !errors.Is(err, hcsSystemNotFound) {
				t.Errorf("HcsTerminateComputeSystem: %v, want HCS_E_SYSTEM_NOT_FOUND", err)
			}
			if s := h.systemState(t, sys); s != "Stopped" {
				t.Errorf("State %q, want Stopped", s)
			}
			quiet(t, "a system gone unannounced", ctx)
		}},
		{"lost: a system's exit is never notified", "HcsEventSystemExited lost 0 1", func(t *testing.T, ctx uintptr) {
			sys := started(t, "fault-lost", ctx)
			if err := terminate(sys); err != nil {
				t.Fatal(err)
			}
			quiet(t, "a lost exit", ctx)
			if s := h.systemState(t, sys); s != "Stopped" {
				t.Errorf("State %q, want Stopped", s)
			}
		}},
		{"twice: a system's exit notified twice", "HcsEventSystemExited twice 0 1", func(t *testing.T, ctx uintptr) {
			sys := started(t, "fault-twice", ctx)
			if err := terminate(sys); err != nil {
				t.Fatal(err)
			}
			eventually(t, "two exit notifications", func() bool { return len(eventsOf(ctx)) == 2 })
		}},
		{"late: a system's exit notified 300 ms late", "HcsEventSystemExited late 0 1", func(t *testing.T, ctx uintptr) {
			sys := started(t, "fault-late", ctx)
			start := time.Now()
			if err := terminate(sys); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the late exit notification", func() bool { return len(eventsOf(ctx)) == 1 })
			if d := time.Since(start); d < 250*time.Millisecond {
				t.Errorf("notified after %v, want 300 ms late", d)
			}
		}},
		{"twice: a process's exit notified twice, with another code", "HcsEventProcessExited twice 63 1", func(t *testing.T, ctx uintptr) {
			// An echo that exits once its stdin closes: after the
			// callback is set, whatever the node's load.
			sys := h.create(t, "fault-process-twice", document(volume(t), false), true)
			exe, _ := os.Executable()
			p, info := h.process(t, sys, fmt.Sprintf(`{"CommandArgs":[%q,"-test.run=^$"],"Environment":{%q:"1"},"CreateStdInPipe":true}`, exe, echoEnv))
			if err := h.call("HcsSetProcessCallback", p, 0, ctx, eventCallback); err != nil {
				t.Fatal(err)
			}
			windows.CloseHandle(info.StdInput)
			if _, err := h.run(t, func(op uintptr) error {
				return h.call("HcsModifyProcess", p, op, uintptr(unsafe.Pointer(u16(`{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`))))
			}); err != nil {
				t.Fatalf("HcsModifyProcess CloseHandle StdIn: %v", err)
			}
			var got []string
			defer func() {
				if t.Failed() {
					t.Logf("notifications: %q", got)
				}
			}()
			eventually(t, "two exit notifications", func() bool {
				got = eventDataOf(ctx)
				return len(got) == 2 && strings.Contains(got[0], `"ExitCode":0`) && strings.Contains(got[1], `"ExitCode":99`)
			})
		}},
		{"lost: a process's exit is never notified", "HcsEventProcessExited lost 0 1", func(t *testing.T, ctx uintptr) {
			sys := h.create(t, "fault-process-lost", document(volume(t), false), true)
			p, _ := h.process(t, sys, `{"CommandLine":"cmd.exe /c ping -n 2 127.0.0.1 >NUL"}`)
			if err := h.call("HcsSetProcessCallback", p, 0, ctx, eventCallback); err != nil {
				t.Fatal(err)
			}
			h.exited(t, p)
			quiet(t, "a lost process exit", ctx)
		}},
		{"deaf: an operation a cancel does not end", "HcsStartComputeSystem deaf 0 1", func(t *testing.T, ctx uintptr) {
			sys := h.create(t, "fault-deaf", document(volume(t), false), false)
			op := h.newOp(t, 0, 0)
			defer h.closeOp(op)
			if err := h.call("HcsStartComputeSystem", sys, op, 0); err != nil {
				t.Fatal(err)
			}
			if err := h.call("HcsCancelOperation", op); err != nil {
				t.Fatal(err)
			}
			if _, err := h.wait(op, 1000); !errors.Is(err, hcsOperationTimeout) {
				t.Errorf("a wait of 1 s after the cancel: %v, want HCS_E_OPERATION_TIMEOUT (still pending)", err)
			}
			if _, err := h.wait(op, 20000); err != nil {
				t.Errorf("the deaf operation's result: %v, want S_OK", err)
			}
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeFaults(t, tc.faults+"\n")
			tc.run(t, callbackFaults+uintptr(i))
			if b, err := os.ReadFile(`C:\ProgramData\winproc-standins\faults`); err != nil || strings.TrimSpace(string(b)) != "" {
				t.Errorf("the fault was not met: %q, %v", b, err)
			}
		})
	}
}

// A fault of a kind its function cannot take (exit, for a process's
// function) is left in the file, and the function answers as HCS does.
func TestFaultKindNotTaken(t *testing.T) {
	h := load(t)
	writeFaults(t, "HcsCreateProcess exit 80370100 1\n")
	sys := h.create(t, "fault-not-taken", document(volume(t), false), true)
	h.process(t, sys, `{"CommandLine":"cmd.exe /c exit 0"}`)
	b, err := os.ReadFile(`C:\ProgramData\winproc-standins\faults`)
	if err != nil || !strings.Contains(string(b), "HcsCreateProcess exit") {
		t.Errorf("the faults file after the call: %q, %v; want the fault left", b, err)
	}
}
