//go:build windows

package hcscontract

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

const (
	hcsServiceDisconnect   = syscall.Errno(0x8037011E)
	eventServiceDisconnect = 0x02000000
)

// killService ends the stand-in HCS service's process, as a crash or a
// reboot of the node ends vmcompute.
func killService(t *testing.T) {
	t.Helper()
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(snap)
	e := windows.ProcessEntry32{Size: uint32(unsafe.Sizeof(windows.ProcessEntry32{}))}
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if !strings.EqualFold(windows.UTF16ToString(e.ExeFile[:]), "computecore-service.exe") {
			continue
		}
		p, err := windows.OpenProcess(windows.PROCESS_TERMINATE|windows.SYNCHRONIZE, false, e.ProcessID)
		if err != nil {
			t.Fatalf("open the HCS service: %v", err)
		}
		defer windows.CloseHandle(p)
		if err := windows.TerminateProcess(p, 1); err != nil {
			t.Fatalf("end the HCS service: %v", err)
		}
		windows.WaitForSingleObject(p, 10000)
		return
	}
	t.Fatal("no computecore-service.exe runs")
}

// When HCS's service goes, its clients hear it (computecore.h
// HCS_EVENT_TYPE HcsEventServiceDisconnect; HCS_E_SERVICE_DISCONNECT for
// an operation in progress: hcsshim internal/hcs/errors.go), and a
// service started again knows no system, as after the node's reboot.
func TestServiceGoes(t *testing.T) {
	h := load(t)
	sys := h.createOwned(t, "service-goes", document(volume(t), false), false)
	defer h.closeSystem(sys)
	if err := h.call("HcsSetComputeSystemCallback", sys, 0, 0x300, eventCallback); err != nil {
		t.Fatal(err)
	}
	writeFaults(t, "HcsStartComputeSystem stall 0 1\n")
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	if err := h.call("HcsStartComputeSystem", sys, op, 0); err != nil {
		t.Fatal(err)
	}
	killService(t)
	if _, err := h.wait(op, 10000); !errors.Is(err, hcsServiceDisconnect) {
		t.Errorf("the operation in progress: %v, want HCS_E_SERVICE_DISCONNECT", err)
	}
	eventually(t, "HcsEventServiceDisconnect", func() bool {
		got := eventsOf(0x300)
		return len(got) == 1 && got[0] == eventServiceDisconnect
	})
	if got := h.enumerate(t); len(got) != 0 {
		t.Errorf("the service started again lists %v", got)
	}
}
