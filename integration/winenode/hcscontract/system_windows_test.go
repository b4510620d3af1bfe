//go:build windows

package hcscontract

import (
	"errors"
	"testing"
	"time"
	"unsafe"
)

// HcsEnumerateComputeSystems (reference page) lists each system with its
// state (ComputeSystemState: Created, Running, Stopped); a stopped system
// is still opened while a handle to it is open and answers
// HCS_E_SYSTEM_ALREADY_STOPPED (hcsshim internal/hcs/errors.go
// ErrVmcomputeAlreadyStopped); with its last handle closed it is gone.
func TestEnumerationStates(t *testing.T) {
	h := load(t)
	sys := h.createOwned(t, "states", document(volume(t), false), false)
	if got := h.enumerate(t)["states"]; got != "Created" {
		t.Errorf("a created system is %q", got)
	}
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsStartComputeSystem", sys, op, 0) }); err != nil {
		t.Fatal(err)
	}
	if got := h.enumerate(t)["states"]; got != "Running" {
		t.Errorf("a started system is %q", got)
	}
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", sys, op, 0) }); err != nil {
		t.Fatal(err)
	}
	if got := h.enumerate(t)["states"]; got != "Stopped" {
		t.Errorf("a terminated system with a handle open is %q", got)
	}
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsShutDownComputeSystem", sys, op, 0) }); !errors.Is(err, hcsSystemAlreadyStop) {
		t.Errorf("HcsShutDownComputeSystem of a stopped system: %v, want HCS_E_SYSTEM_ALREADY_STOPPED", err)
	}
	h.closeSystem(sys)
	if _, ok := h.enumerate(t)["states"]; ok {
		t.Error("a stopped system whose handles are closed is still listed")
	}
	if _, err := h.open("states"); !errors.Is(err, hcsSystemNotFound) {
		t.Errorf("HcsOpenComputeSystem of a gone system: %v, want HCS_E_SYSTEM_NOT_FOUND", err)
	}
}

// HCS keeps systems in its service, not in its caller: a system made by
// another process is opened and listed by this one, and outlives its
// creator (hcsshim internal/hcs/system.go OpenComputeSystem: the shim's
// delete and runhcs's reopen).
func TestSystemOutlivesCreator(t *testing.T) {
	h := load(t)
	otherClient(t, "outlives", volume(t), "keep")
	if got := h.enumerate(t)["outlives"]; got != "Running" {
		t.Errorf("the system the exited client made is listed %q, want Running", got)
	}
	sys, err := h.open("outlives")
	if err != nil {
		t.Fatalf("HcsOpenComputeSystem of another process's system: %v", err)
	}
	defer h.closeSystem(sys)
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", sys, op, 0) }); err != nil {
		t.Errorf("HcsTerminateComputeSystem: %v", err)
	}
}

// ShouldTerminateOnLastHandleClosed (HCS JSON schema, ComputeSystem;
// hcsshim internal/hcsoci/create.go sets it for runhcs): the close of the
// system's last handle terminates it, and so does the exit of the process
// that held it; a system without it stays.
func TestLastHandleCloseTerminates(t *testing.T) {
	h := load(t)
	sys := h.createOwned(t, "last-close", document(volume(t), true), true)
	h.closeSystem(sys)
	if _, ok := h.enumerate(t)["last-close"]; ok {
		t.Error("a system to terminate on its last handle's close is listed after it")
	}

	otherClient(t, "client-died", volume(t), "terminate")
	eventually(t, "the dead client's system terminated", func() bool {
		_, ok := h.enumerate(t)["client-died"]
		return !ok
	})

	h.create(t, "kept", document(volume(t), false), true)
	other, err := h.open("kept")
	if err != nil {
		t.Fatal(err)
	}
	h.closeSystem(other)
	if got := h.enumerate(t)["kept"]; got != "Running" {
		t.Errorf("a system without ShouldTerminateOnLastHandleClosed after a handle's close: %q", got)
	}
}

// An operation never started by a failed call is not pending: its result
// says not started (HcsGetOperationResult reference page), and a call on
// a closed handle fails without completing anything.
func TestFailedCallStartsNothing(t *testing.T) {
	h := load(t)
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	var sys uintptr
	err := h.call("HcsCreateComputeSystem", uintptr(unsafe.Pointer(u16("no-document"))), 0, op, 0, uintptr(unsafe.Pointer(&sys)))
	if err == nil {
		t.Fatal("HcsCreateComputeSystem without a document succeeded")
	}
	var doc *uint16
	if err := h.call("HcsGetOperationResult", op, uintptr(unsafe.Pointer(&doc))); !errors.Is(err, hcsOperationNotStart) {
		t.Errorf("the failed call's operation: %v, want HCS_E_OPERATION_NOT_STARTED", err)
	}
	take(doc)
}

// HcsShutDownComputeSystem shuts the container's Windows down, and the
// system sends CTRL_SHUTDOWN_EVENT to the console processes when it shuts
// down (HandlerRoutine reference page): a program a container's process
// started gets it too, the shutdown completes, and the system exits
// (SystemExited). runhcs shuts a container down so and waits 30 s for
// that notification before it terminates (hcsshim cmd/containerd-shim-
// runhcs-v1 task_hcs.go, hcsTask.close).
func TestShutdownReachesEveryProcess(t *testing.T) {
	h := load(t)
	sys := h.create(t, "shutdown-all", document(volume(t), false), true)
	if err := h.call("HcsSetComputeSystemCallback", sys, 0, 0x200, eventCallback); err != nil {
		t.Fatal(err)
	}
	h.process(t, sys, `{"CommandLine":"cmd.exe /c ping -n 60 localhost"}`)
	time.Sleep(time.Second) // cmd.exe has started ping
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsShutDownComputeSystem", sys, op, 0) }); err != nil {
		t.Fatalf("HcsShutDownComputeSystem of a system whose process started another: %v", err)
	}
	eventually(t, "SystemExited after the shutdown", func() bool {
		got := eventsOf(0x200)
		return len(got) > 0 && got[len(got)-1] == eventSystemExited
	})
}
