//go:build windows

package hcscontract

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
)

// HRESULTs of the HCS reference (winerror.h's HCS_E_*).
const (
	hcsInvalidJSON        = syscall.Errno(0x8037010D)
	hcsSystemNotFound     = syscall.Errno(0x8037010E)
	hcsSystemAlreadyStop  = syscall.Errno(0x80370110)
	hcsOperationNotStart  = syscall.Errno(0x80370115)
	hcsOperationPending   = syscall.Errno(0x80370117)
	hcsOperationTimeout   = syscall.Errno(0x80370118)
	hcsProcessAlreadyStop = syscall.Errno(0x8037011F)
	errNotSupportedHR     = syscall.Errno(0x80070032)

	eventSystemExited  = 0x00000001
	eventProcessExited = 0x00010000
)

// hcs is the stand-in computecore.dll, loaded from the path the Linux
// side gives.
type hcs struct{ dll *windows.LazyDLL }

var (
	loadOnce sync.Once
	theDLL   *hcs
)

func load(t *testing.T) *hcs {
	t.Helper()
	path := os.Getenv(StandinEnv)
	if path == "" {
		t.Skipf("%s is not set: contract_wine_test.go runs these tests with the stand-in", StandinEnv)
	}
	loadOnce.Do(func() { theDLL = &hcs{windows.NewLazyDLL(path)} })
	return theDLL
}

// call calls name with args and returns its HRESULT as an error. Its
// pointers, converted in the caller's expression, are kept alive and in
// place until it returns (go:uintptrescapes, as LazyProc.Call).
//
//go:uintptrescapes
func (h *hcs) call(name string, args ...uintptr) error {
	r, _, _ := h.dll.NewProc(name).Call(args...)
	if int32(r) < 0 {
		return syscall.Errno(uint32(r))
	}
	return nil
}

func u16(s string) *uint16 {
	if s == "" {
		return nil
	}
	p, _ := windows.UTF16PtrFromString(s)
	return p
}

func take(p *uint16) string {
	if p == nil {
		return ""
	}
	s := windows.UTF16PtrToString(p)
	windows.LocalFree(windows.Handle(unsafe.Pointer(p)))
	return s
}

func (h *hcs) newOp(t *testing.T, ctx, callback uintptr) uintptr {
	t.Helper()
	r, _, _ := h.dll.NewProc("HcsCreateOperation").Call(ctx, callback)
	if r == 0 {
		t.Fatal("HcsCreateOperation made no operation")
	}
	return r
}

func (h *hcs) closeOp(op uintptr) { h.dll.NewProc("HcsCloseOperation").Call(op) }

// wait is HcsWaitForOperationResult: the result document and HRESULT.
func (h *hcs) wait(op uintptr, ms uint32) (string, error) {
	var doc *uint16
	err := h.call("HcsWaitForOperationResult", op, uintptr(ms), uintptr(unsafe.Pointer(&doc)))
	return take(doc), err
}

// processInfo is HCS_PROCESS_INFORMATION.
type processInfo struct {
	ProcessID uint32
	Reserved  uint32
	StdInput  windows.Handle
	StdOutput windows.Handle
	StdError  windows.Handle
}

// run starts an operation with start and waits up to 20 s for it.
func (h *hcs) run(t *testing.T, start func(op uintptr) error) (string, error) {
	t.Helper()
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	if err := start(op); err != nil {
		return "", err
	}
	return h.wait(op, 20000)
}

// volume makes a directory the stand-in's layer functions would have made
// for a volume, and names the volume: the state file vmcompute.c writes
// (standin.h standin_state_file), so a system's Storage.Path is found.
func volume(t *testing.T) string {
	t.Helper()
	name, _ := volumeDir(t)
	return name
}

// volumeDir is volume, with the volume's directory.
func volumeDir(t *testing.T) (name, dir string) {
	t.Helper()
	dir = winetest.TempDir(t)
	name = fmt.Sprintf(`\\?\Volume{%s}`, strings.ReplaceAll(filepath.Base(dir), ".", "-"))
	if err := WriteVolume(name, dir); err != nil {
		t.Fatal(err)
	}
	return name, dir
}

// document is a contract test's container document on vol.
func document(vol string, terminateOnClose bool) string {
	return Document("contract", vol, terminateOnClose)
}

// create creates (and with start, starts) a system; the cleanup
// terminates and closes it.
func (h *hcs) create(t *testing.T, id, doc string, start bool) uintptr {
	t.Helper()
	sys := h.createOwned(t, id, doc, start)
	t.Cleanup(func() {
		h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", sys, op, 0) })
		h.closeSystem(sys)
	})
	return sys
}

// createOwned is create for a test that closes the handle itself.
func (h *hcs) createOwned(t *testing.T, id, doc string, start bool) uintptr {
	t.Helper()
	var sys uintptr
	if _, err := h.run(t, func(op uintptr) error {
		return h.call("HcsCreateComputeSystem", uintptr(unsafe.Pointer(u16(id))), uintptr(unsafe.Pointer(u16(doc))), op, 0, uintptr(unsafe.Pointer(&sys)))
	}); err != nil {
		t.Fatalf("HcsCreateComputeSystem %s: %v", id, err)
	}
	if start {
		if _, err := h.run(t, func(op uintptr) error { return h.call("HcsStartComputeSystem", sys, op, 0) }); err != nil {
			t.Fatalf("HcsStartComputeSystem %s: %v", id, err)
		}
	}
	return sys
}

func (h *hcs) closeSystem(sys uintptr) { h.dll.NewProc("HcsCloseComputeSystem").Call(sys) }

func (h *hcs) open(id string) (uintptr, error) {
	var sys uintptr
	err := h.call("HcsOpenComputeSystem", uintptr(unsafe.Pointer(u16(id))), uintptr(windows.GENERIC_ALL), uintptr(unsafe.Pointer(&sys)))
	return sys, err
}

// enumerate is the list HcsEnumerateComputeSystems gives, id to state.
func (h *hcs) enumerate(t *testing.T) map[string]string {
	t.Helper()
	doc, err := h.run(t, func(op uintptr) error { return h.call("HcsEnumerateComputeSystems", 0, op) })
	if err != nil {
		t.Fatalf("HcsEnumerateComputeSystems: %v", err)
	}
	return states(t, doc)
}

// process starts params in sys and returns its handle and information.
func (h *hcs) process(t *testing.T, sys uintptr, params string) (uintptr, processInfo) {
	t.Helper()
	var p uintptr
	var info processInfo
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	if err := h.call("HcsCreateProcess", sys, uintptr(unsafe.Pointer(u16(params))), op, 0, uintptr(unsafe.Pointer(&p))); err != nil {
		t.Fatalf("HcsCreateProcess %s: %v", params, err)
	}
	var doc *uint16
	if err := h.call("HcsWaitForOperationResultAndProcessInfo", op, 20000, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc))); err != nil {
		t.Fatalf("HcsCreateProcess %s: %v %s", params, err, take(doc))
	}
	take(doc)
	t.Cleanup(func() { h.dll.NewProc("HcsCloseProcess").Call(p) })
	return p, info
}

// exited polls the process's properties until it has exited.
func (h *hcs) exited(t *testing.T, p uintptr) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		doc, err := h.run(t, func(op uintptr) error { return h.call("HcsGetProcessProperties", p, op, 0) })
		if err != nil {
			t.Fatalf("HcsGetProcessProperties: %v", err)
		}
		if strings.Contains(doc, `"Exited":true`) {
			return doc
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the process did not exit in 20 s")
	return ""
}
