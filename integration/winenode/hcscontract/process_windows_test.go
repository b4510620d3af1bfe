//go:build windows

package hcscontract

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// exitedProcess starts a process that exits at once and waits for it.
func exitedProcess(t *testing.T, h *hcs, id string) (sys, p uintptr) {
	t.Helper()
	sys = h.create(t, id, document(volume(t), false), true)
	p, _ = h.process(t, sys, `{"CommandLine":"cmd.exe /c exit 7"}`)
	if doc := h.exited(t, p); !strings.Contains(doc, `"ExitCode":7`) {
		t.Errorf("the process's properties %s: want ExitCode 7", doc)
	}
	return sys, p
}

// HcsSetProcessCallback (reference page) registers a callback for events
// to come; no replay of past events is documented, so an exit that
// happened before is not replayed (the client reads the process's
// properties for it).
func TestExitNotReplayed(t *testing.T) {
	h := load(t)
	_, p := exitedProcess(t, h, "not-replayed")
	if err := h.call("HcsSetProcessCallback", p, 0, 0x200, eventCallback); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got := eventsOf(0x200); len(got) != 0 {
		t.Errorf("a callback set after the exit got %v", got)
	}
}

// A process's exit reaches the callbacks set before it (HCS_EVENT_TYPE
// HcsEventProcessExited).
func TestProcessExitNotified(t *testing.T) {
	h := load(t)
	sys := h.create(t, "exit-notified", document(volume(t), false), true)
	p, _ := h.process(t, sys, `{"CommandLine":"cmd.exe /c ping -n 2 127.0.0.1 >NUL"}`)
	if err := h.call("HcsSetProcessCallback", p, 0, 0x201, eventCallback); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ProcessExited notification", func() bool {
		got := eventsOf(0x201)
		return len(got) == 1 && got[0] == eventProcessExited
	})
}

// Signal and terminate of an exited process fail with
// HCS_E_PROCESS_ALREADY_STOPPED (hcsshim internal/hcs/errors.go
// ErrProcessAlreadyStopped, which its Kill and Signal treat as done); a
// signal SignalProcessOptions does not list is refused; an exited process
// is no longer opened (ERROR_NOT_FOUND: hcsshim's IsNotExist).
func TestExitedProcessCalls(t *testing.T) {
	h := load(t)
	sys, p := exitedProcess(t, h, "exited-calls")
	for _, tc := range []struct {
		name, opts string
		want       error
	}{
		{"HcsSignalProcess", `{"Signal":"CtrlC"}`, hcsProcessAlreadyStop},
		{"HcsSignalProcess", `{"Signal":"SIGKILL"}`, hcsInvalidJSON},
		{"HcsTerminateProcess", ``, hcsProcessAlreadyStop},
	} {
		_, err := h.run(t, func(op uintptr) error { return h.call(tc.name, p, op, uintptr(unsafe.Pointer(u16(tc.opts)))) })
		if !errors.Is(err, tc.want) {
			t.Errorf("%s %s: %v, want %v", tc.name, tc.opts, err, tc.want)
		}
	}
	var other uintptr
	pid := h.pid(t, p)
	if err := h.call("HcsOpenProcess", sys, uintptr(pid), uintptr(windows.GENERIC_ALL), uintptr(unsafe.Pointer(&other))); !errors.Is(err, windows.Errno(0x80070490)) {
		t.Errorf("HcsOpenProcess of an exited process: %v, want ERROR_NOT_FOUND", err)
	}
}

// pid is the process's id from HcsGetProcessInfo.
func (h *hcs) pid(t *testing.T, p uintptr) uint32 {
	t.Helper()
	info := h.processInfo(t, p)
	for _, x := range []windows.Handle{info.StdInput, info.StdOutput, info.StdError} {
		if x != 0 {
			windows.CloseHandle(x)
		}
	}
	return info.ProcessID
}

func (h *hcs) processInfo(t *testing.T, p uintptr) processInfo {
	t.Helper()
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	if err := h.call("HcsGetProcessInfo", p, op); err != nil {
		t.Fatal(err)
	}
	var info processInfo
	var doc *uint16
	if err := h.call("HcsWaitForOperationResultAndProcessInfo", op, 20000, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc))); err != nil {
		t.Fatalf("HcsGetProcessInfo: %v %s", err, take(doc))
	}
	return info
}

// HcsGetProcessInfo hands back the stdio HCS still holds, as new handles
// of the caller (hcsshim internal/hcs/process.go StdioLegacy: "Once
// returned, these pipes are the responsibility of the caller to close");
// HcsModifyProcess's CloseHandle of StdIn (ProcessModifyRequest) leaves
// none; a ConsoleSize is taken, an unknown operation refused.
func TestProcessInfoAndModify(t *testing.T) {
	h := load(t)
	sys := h.create(t, "process-info", document(volume(t), false), true)
	exe, _ := os.Executable()
	p, first := h.process(t, sys, `{"CommandLine":"`+strings.ReplaceAll(exe, `\`, `\\`)+` -test.run=^$","Environment":{"`+echoEnv+`":"1"},"CreateStdInPipe":true,"CreateStdOutPipe":true}`)
	defer windows.CloseHandle(first.StdOutput)
	again := h.processInfo(t, p)
	if again.ProcessID != first.ProcessID || again.StdInput == 0 || again.StdOutput == 0 || again.StdInput == first.StdInput {
		t.Errorf("HcsGetProcessInfo %+v after create %+v: want the same pid and new handles", again, first)
	}
	windows.CloseHandle(again.StdInput)
	windows.CloseHandle(again.StdOutput)
	for _, tc := range []struct {
		doc  string
		want error
	}{
		{`{"Operation":"ConsoleSize","ConsoleSize":{"Height":40,"Width":120}}`, nil},
		{`{"Operation":"Rename"}`, hcsInvalidJSON},
		{`{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`, nil},
	} {
		if _, err := h.run(t, func(op uintptr) error { return h.call("HcsModifyProcess", p, op, uintptr(unsafe.Pointer(u16(tc.doc)))) }); !errors.Is(err, tc.want) && err != tc.want {
			t.Errorf("HcsModifyProcess %s: %v, want %v", tc.doc, err, tc.want)
		}
	}
	if info := h.processInfo(t, p); info.StdInput != 0 || info.StdOutput == 0 {
		t.Errorf("HcsGetProcessInfo after stdin's close: %+v, want no stdin and a stdout", info)
	} else {
		windows.CloseHandle(info.StdOutput)
	}
	// The child reads EOF once the caller's stdin is closed too.
	windows.CloseHandle(first.StdInput)
	h.exited(t, p)
}

// HcsGetComputeSystemProperties (reference page; PropertyQuery in the
// schema): Statistics and ProcessList are answered, a type the stand-in
// does not serve is refused.
func TestPropertyQueries(t *testing.T) {
	h := load(t)
	sys := h.create(t, "properties", document(volume(t), false), true)
	for _, tc := range []struct {
		query, want string
		err         error
	}{
		{`{"PropertyTypes":["Statistics"]}`, `"Statistics":{`, nil},
		{`{"PropertyTypes":["ProcessList"]}`, `"ProcessList":[`, nil},
		{`{"PropertyTypes":["Memory"]}`, ``, errNotSupportedHR},
	} {
		doc, err := h.run(t, func(op uintptr) error {
			return h.call("HcsGetComputeSystemProperties", sys, op, uintptr(unsafe.Pointer(u16(tc.query))))
		})
		if !errors.Is(err, tc.err) && err != tc.err {
			t.Errorf("%s: %v, want %v", tc.query, err, tc.err)
		}
		if tc.err == nil && !strings.Contains(doc, tc.want) {
			t.Errorf("%s: %s, want %s", tc.query, doc, tc.want)
		}
	}
}
