//go:build windows

package hcscontract

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/Microsoft/go-winio"
)

const eInvalidArg = syscall.Errno(0x80070057)

// pending checks that op has not completed within 300 ms.
func (h *hcs) pending(t *testing.T, what string, op uintptr) {
	t.Helper()
	if _, err := h.wait(op, 300); !errors.Is(err, hcsOperationTimeout) {
		t.Errorf("%s: %v, want it still pending (HCS_E_OPERATION_TIMEOUT of the wait)", what, err)
	}
}

// startOp starts call on the process handle p with options and returns
// its operation, which the test closes.
func (h *hcs) startOp(t *testing.T, call string, p uintptr, options string) uintptr {
	t.Helper()
	op := h.newOp(t, 0, 0)
	t.Cleanup(func() { h.closeOp(op) })
	if err := h.call(call, p, op, uintptr(unsafe.Pointer(u16(options)))); err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	return op
}

// faults.h's hold: a console event whose call lasts until the process
// exits (hcsshim cmd/containerd-shim-runhcs-v1 exec_hcs.go, Bug36689012)
// holds the signals and terminates of the process sent through the same
// system handle, and only those: "HCS serializes the signals sent to a
// target pid per compute system handle" (hcsshim internal/hcs/v2
// process.go Kill, which terminates through a system handle of its own).
func TestFaultHold(t *testing.T) {
	h := load(t)
	writeFaults(t, "HcsSignalProcess hold 0 1\n")
	sys := h.create(t, "fault-hold", document(volume(t), false), true)
	exe, _ := os.Executable()
	p, info := h.process(t, sys, fmt.Sprintf(`{"CommandArgs":[%q,"-test.run=^$"],"Environment":{%q:"1"},"CreateStdOutPipe":true}`, exe, holdEnv))
	pid := info.ProcessID
	// The event once the process takes events: before, the default
	// handler would end it.
	out, err := winio.NewOpenFile(info.StdOutput)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if line, err := bufio.NewReader(out).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("the process said %q, %v; want ready", line, err)
	}

	signal := h.startOp(t, "HcsSignalProcess", p, `{"Signal":"CtrlC"}`)
	h.pending(t, "the held console event", signal)
	queued := h.startOp(t, "HcsTerminateProcess", p, "")
	h.pending(t, "a terminate on the same process handle", queued)
	var same uintptr
	if err := h.call("HcsOpenProcess", sys, uintptr(pid), 0, uintptr(unsafe.Pointer(&same))); err != nil {
		t.Fatalf("HcsOpenProcess through the same system handle: %v", err)
	}
	defer h.dll.NewProc("HcsCloseProcess").Call(same)
	queuedToo := h.startOp(t, "HcsTerminateProcess", same, "")
	h.pending(t, "a terminate through another process handle of the same system handle", queuedToo)
	doc, err := h.run(t, func(op uintptr) error { return h.call("HcsGetProcessProperties", p, op, 0) })
	if err != nil || !strings.Contains(doc, `"Exited":false`) {
		t.Fatalf("the process behind the held event: %s, %v; want it running", doc, err)
	}

	other, err := h.open("fault-hold")
	if err != nil {
		t.Fatal(err)
	}
	defer h.closeSystem(other)
	var kill uintptr
	if err := h.call("HcsOpenProcess", other, uintptr(pid), 0, uintptr(unsafe.Pointer(&kill))); err != nil {
		t.Fatalf("HcsOpenProcess through a second system handle: %v", err)
	}
	defer h.dll.NewProc("HcsCloseProcess").Call(kill)
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateProcess", kill, op, 0) }); err != nil {
		t.Fatalf("a terminate through a second system handle: %v", err)
	}
	h.exited(t, p)
	if _, err := h.wait(signal, 10000); err != nil {
		t.Errorf("the held console event once the process exited: %v, want S_OK", err)
	}
	for _, op := range []uintptr{queued, queuedToo} {
		if _, err := h.wait(op, 10000); !errors.Is(err, hcsProcessAlreadyStop) {
			t.Errorf("a queued terminate once the process exited: %v, want HCS_E_PROCESS_ALREADY_STOPPED", err)
		}
	}
}

// faults.h's spurious: HcsCreateProcess's operation fails (E_INVALIDARG,
// observed on Windows Server 2022: hcsshim internal/hcs/v2 system.go
// createProcess) although the process was made: its handle is valid and
// HcsGetProcessInfo hands over its id and pipes.
func TestFaultSpurious(t *testing.T) {
	h := load(t)
	writeFaults(t, "HcsCreateProcess spurious 80070057 1\n")
	sys := h.create(t, "fault-spurious", document(volume(t), false), true)
	var p uintptr
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	params := `{"CommandLine":"cmd.exe /c echo made anyway","CreateStdOutPipe":true}`
	if err := h.call("HcsCreateProcess", sys, uintptr(unsafe.Pointer(u16(params))), op, 0, uintptr(unsafe.Pointer(&p))); err != nil {
		t.Fatal(err)
	}
	defer h.dll.NewProc("HcsCloseProcess").Call(p)
	if _, err := h.wait(op, 20000); !errors.Is(err, eInvalidArg) || p == 0 {
		t.Fatalf("the create's wait: %v with handle %#x; want E_INVALIDARG and a handle", err, p)
	}
	info := h.processInfo(t, p)
	if info.ProcessID == 0 || info.StdOutput == 0 {
		t.Fatalf("HcsGetProcessInfo after the failed wait: %+v; want the pid and stdout", info)
	}
	out, err := winio.NewOpenFile(info.StdOutput)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if b, _ := io.ReadAll(out); !strings.Contains(string(b), "made anyway") {
		t.Errorf("the process's stdout %q", b)
	}
}
