//go:build windows

package hcs

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/osversion"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
)

// These tests run the Windows adapter without HCS (none of them needs
// computecore.dll), so they also run under Wine.

// TestWindowsFacts reads HCS's HRESULTs as the binding returns them, and
// the layer functions' hcsshim errors, plain and wrapped by the backend.
func TestWindowsFacts(t *testing.T) {
	var api windowsAPI
	cases := []struct {
		name  string
		err   error
		check func(errFacts) bool
		class func(error) bool
	}{
		{"system does not exist", syscall.Errno(0xC037010E), func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
		{"element not found", syscall.Errno(0x490), func(f errFacts) bool { return f.NotExist && f.AlreadyStopped }, errdefs.IsNotFound},
		{"already stopped", syscall.Errno(0xC0370110), func(f errFacts) bool { return f.AlreadyStopped }, errdefs.IsNotFound},
		{"process already stopped", syscall.Errno(0x8037011F), func(f errFacts) bool { return f.AlreadyStopped }, errdefs.IsNotFound},
		{"closed by the core", errHandleClosed, func(f errFacts) bool { return f.AlreadyClosed }, errdefs.IsFailedPrecondition},
		{"operation timeout", syscall.Errno(0x80370118), func(f errFacts) bool { return f.Timeout }, nil},
		{"invalid state", syscall.Errno(0xC0370105), func(f errFacts) bool { return f.InvalidState }, errdefs.IsFailedPrecondition},
		{"invalid JSON", syscall.Errno(0xC037010D), func(f errFacts) bool { return f.NotSupported }, errdefs.IsNotImplemented},
		{"service disconnected", errServiceGone, func(f errFacts) bool { return f.Unavailable }, errdefs.IsUnavailable},
		{"layer not ready", &hcsshim.HcsError{Err: syscall.Errno(21)}, func(f errFacts) bool { return f.LayerNotReady }, nil},
		{"access denied activating a layer", &hcsshim.HcsError{Err: syscall.Errno(5)}, func(f errFacts) bool { return f.AccessDenied }, errdefs.IsPermissionDenied},
		{"already exists", syscall.Errno(0x8037010F), func(f errFacts) bool { return f.AlreadyExists }, errdefs.IsAlreadyExists},
		{"no computecore.dll", syscall.Errno(126), func(f errFacts) bool { return f.ServiceMissing }, nil},
		{"with HCS's detail", withResult(syscall.Errno(0xC037010E), `{"ErrorMessage":"gone"}`), func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("backend context: %w", tc.err)} {
				f := api.facts(err)
				if !tc.check(f) {
					t.Errorf("facts(%v) = %+v", err, f)
				}
				if tc.class != nil && !tc.class(classify("op", err, f)) {
					t.Errorf("classify(%v) is not of the expected class", err)
				}
			}
		})
	}
	if f := api.facts(nil); f != (errFacts{}) {
		t.Errorf("facts(nil) = %+v", f)
	}
}

// The one HCS_EVENT_CALLBACK, called as HCS calls it (a stdcall function
// of an HCS_EVENT pointer and the context), hands the event to the
// listener of its key with the event data decoded; a key without a
// listener drops it.
func TestEventCallback(t *testing.T) {
	got := make(chan string, 1)
	key := hcsEvents.add(func(typ eventType, data string) { got <- fmt.Sprintf("%#x %s", uint32(typ), data) })
	data, err := windows.UTF16PtrFromString(`{"ExitCode":3,"Exited":true}`)
	if err != nil {
		t.Fatal(err)
	}
	ev := hcsEvent{Type: uint32(eventProcessExited), EventData: data}
	syscall.SyscallN(eventCallback, uintptr(unsafe.Pointer(&ev)), key)
	if s := <-got; s != `0x10000 {"ExitCode":3,"Exited":true}` {
		t.Errorf("listener got %q", s)
	}
	hcsEvents.remove(key)
	syscall.SyscallN(eventCallback, uintptr(unsafe.Pointer(&ev)), key)
	syscall.SyscallN(eventCallback, 0, key)
	select {
	case s := <-got:
		t.Errorf("a removed listener got %q", s)
	default:
	}
}

// HRESULTs are errors when negative.
func TestBindingConversions(t *testing.T) {
	if err := hresult(0); err != nil {
		t.Errorf("S_OK = %v", err)
	}
	if err := hresult(1); err != nil {
		t.Errorf("S_FALSE = %v", err)
	}
	if err := hresult(uintptr(0xC037010E)); err != syscall.Errno(0xC037010E) {
		t.Errorf("HCS_E_SYSTEM_NOT_FOUND = %v", err)
	}
	if s := takeString(nil); s != "" {
		t.Errorf("takeString(nil) = %q", s)
	}
}

// The real backend counts the processors of every group with
// GetActiveProcessorCount(ALL_PROCESSOR_GROUPS), which Wine answers too.
func TestHostCPUsAllGroups(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := int(windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS))
	if got := b.HostCPUs(); got < 1 || got != want {
		t.Errorf("HostCPUs = %d, want GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) = %d", got, want)
	}
}

// A host without the compute service (Wine, or Windows without the
// Containers feature) has no computecore.dll: the binding's calls fail
// with ERROR_MOD_NOT_FOUND. The backend says how to install the service,
// and Open, which the shim's delete uses, finds no system to clean up.
func TestNoComputeService(t *testing.T) {
	if windows.NewLazySystemDLL("computecore.dll").Load() == nil {
		t.Skip("this host has the compute service")
	}
	b, err := New(Options{StateDir: winetest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = b.Open(ctx, "x")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Open = %v, want NotFound with the fix", err)
	}
	_, err = b.Create(ctx, "x", &compute.Settings{Layers: compute.Layers{Scratch: `C:\s\x`, Parents: []string{`C:\l\base`}}})
	if osversion.Build() < osversion.RS5 {
		if !errdefs.IsNotImplemented(err) {
			t.Errorf("Create on build %d = %v, want NotImplemented", osversion.Build(), err)
		}
		return
	}
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Create = %v, want Unavailable with the fix", err)
	}
}
