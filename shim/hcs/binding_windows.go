//go:build windows

package hcs

import (
	"errors"
	"io"
	"syscall"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// This file is the binding to computecore.dll: one system call per
// method, with strings converted to and from UTF-16 and HRESULTs returned
// as syscall.Errno. It makes no decision (core.go does). Nothing here runs
// HCS on this project's machines; each function's parameters were matched
// against Microsoft's HCS API reference (computecore.h) and the //sys
// declarations of hcsshim v0.15.0 internal/computecore/computecore.go, the
// structures against its types.go (HcsEvent, HcsProcessInformation). Under
// Wine, hcs_windows_test.go calls the notification callback as HCS does and
// loads the missing DLL.

var (
	computecore = windows.NewLazySystemDLL("computecore.dll")
	ntdll       = windows.NewLazySystemDLL("ntdll.dll")

	procHcsCreateOperation                      = computecore.NewProc("HcsCreateOperation")
	procHcsCloseOperation                       = computecore.NewProc("HcsCloseOperation")
	procHcsWaitForOperationResult               = computecore.NewProc("HcsWaitForOperationResult")
	procHcsWaitForOperationResultAndProcessInfo = computecore.NewProc("HcsWaitForOperationResultAndProcessInfo")
	procHcsGetOperationResult                   = computecore.NewProc("HcsGetOperationResult")
	procHcsCancelOperation                      = computecore.NewProc("HcsCancelOperation")
	procHcsCreateComputeSystem                  = computecore.NewProc("HcsCreateComputeSystem")
	procHcsOpenComputeSystem                    = computecore.NewProc("HcsOpenComputeSystem")
	procHcsCloseComputeSystem                   = computecore.NewProc("HcsCloseComputeSystem")
	procHcsStartComputeSystem                   = computecore.NewProc("HcsStartComputeSystem")
	procHcsShutDownComputeSystem                = computecore.NewProc("HcsShutDownComputeSystem")
	procHcsTerminateComputeSystem               = computecore.NewProc("HcsTerminateComputeSystem")
	procHcsModifyComputeSystem                  = computecore.NewProc("HcsModifyComputeSystem")
	procHcsGetComputeSystemProperties           = computecore.NewProc("HcsGetComputeSystemProperties")
	procHcsSetComputeSystemCallback             = computecore.NewProc("HcsSetComputeSystemCallback")
	procHcsCreateProcess                        = computecore.NewProc("HcsCreateProcess")
	procHcsCloseProcess                         = computecore.NewProc("HcsCloseProcess")
	procHcsSignalProcess                        = computecore.NewProc("HcsSignalProcess")
	procHcsTerminateProcess                     = computecore.NewProc("HcsTerminateProcess")
	procHcsModifyProcess                        = computecore.NewProc("HcsModifyProcess")
	procHcsGetProcessProperties                 = computecore.NewProc("HcsGetProcessProperties")
	procHcsSetProcessCallback                   = computecore.NewProc("HcsSetProcessCallback")
	procHcsModifyServiceSettings                = computecore.NewProc("HcsModifyServiceSettings")
	procHcsGetServiceProperties                 = computecore.NewProc("HcsGetServiceProperties")
	procNtOpenJobObject                         = ntdll.NewProc("NtOpenJobObject")

	// eventCallback is the one HCS_EVENT_CALLBACK: Windows keeps a
	// limited number of callbacks, so every handle shares it, and its
	// context is the hcsEvents key.
	eventCallback = windows.NewCallback(func(event *hcsEvent, context uintptr) uintptr {
		if event != nil {
			hcsEvents.deliver(context, eventType(event.Type), windows.UTF16PtrToString(event.EventData))
		}
		return 0
	})
)

// hcsEvent is HCS_EVENT.
type hcsEvent struct {
	Type      uint32
	EventData *uint16
	Operation uintptr
}

// hcsProcessInformation is HCS_PROCESS_INFORMATION.
type hcsProcessInformation struct {
	ProcessID uint32
	Reserved  uint32
	StdInput  windows.Handle
	StdOutput windows.Handle
	StdError  windows.Handle
}

type computecoreBinding struct{}

var _ binding = computecoreBinding{}

// call calls proc, loading it first (a host without the Containers feature
// has no computecore.dll: the load error is ERROR_MOD_NOT_FOUND), and
// returns the HRESULT it returns as an error.
func call(proc *windows.LazyProc, args ...uintptr) error {
	if err := proc.Find(); err != nil {
		return loadError(err)
	}
	r, _, _ := syscall.SyscallN(proc.Addr(), args...)
	return hresult(r)
}

// callVoid calls a function that returns nothing.
func callVoid(proc *windows.LazyProc, args ...uintptr) {
	if proc.Find() == nil {
		syscall.SyscallN(proc.Addr(), args...)
	}
}

func loadError(err error) error {
	if e, ok := err.(*windows.DLLError); ok && e.Err != nil {
		return e.Err
	}
	return err
}

func hresult(r uintptr) error {
	if int32(r) < 0 {
		return syscall.Errno(uint32(r))
	}
	return nil
}

func utf16(s string) (uintptr, error) {
	if s == "" {
		return 0, nil
	}
	p, err := windows.UTF16PtrFromString(s)
	return uintptr(unsafe.Pointer(p)), err
}

// takeString reads and frees a string HCS allocated.
func takeString(p *uint16) string {
	if p == nil {
		return ""
	}
	s := windows.UTF16PtrToString(p)
	windows.LocalFree(windows.Handle(unsafe.Pointer(p)))
	return s
}

func (computecoreBinding) createOperation() (hcsHandle, error) {
	if err := procHcsCreateOperation.Find(); err != nil {
		return 0, loadError(err)
	}
	r, _, err := syscall.SyscallN(procHcsCreateOperation.Addr(), 0, 0)
	if r == 0 {
		return 0, err
	}
	return hcsHandle(r), nil
}

func (computecoreBinding) closeOperation(op hcsHandle) {
	callVoid(procHcsCloseOperation, uintptr(op))
}

func (computecoreBinding) waitOperation(op hcsHandle, timeoutMs uint32) (string, error) {
	var doc *uint16
	err := call(procHcsWaitForOperationResult, uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), err
}

func (computecoreBinding) waitOperationProcess(op hcsHandle, timeoutMs uint32) (processPipes, string, error) {
	var info hcsProcessInformation
	var doc *uint16
	err := call(procHcsWaitForOperationResultAndProcessInfo, uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc)))
	pipes := processPipes{pid: info.ProcessID}
	in, ierr := openPipe(info.StdInput)
	out, oerr := openPipe(info.StdOutput)
	errOut, eerr := openPipe(info.StdError)
	// Only the pipes asked for are set: a nil *os.File-like value in the
	// interface would not be nil.
	if in != nil {
		pipes.stdin = in
	}
	if out != nil {
		pipes.stdout = out
	}
	if errOut != nil {
		pipes.stderr = errOut
	}
	if err == nil {
		err = errors.Join(ierr, oerr, eerr)
	}
	return pipes, takeString(doc), err
}

// openPipe wraps a pipe handle HCS handed over for overlapped I/O, as
// hcsshim does; it closes the handle if that fails. A zero handle is a
// pipe not asked for.
func openPipe(h windows.Handle) (io.ReadWriteCloser, error) {
	if h == 0 {
		return nil, nil
	}
	f, err := winio.NewOpenFile(h)
	if err != nil {
		windows.CloseHandle(h)
		return nil, err
	}
	return f, nil
}

func (computecoreBinding) operationResult(op hcsHandle) (string, error) {
	var doc *uint16
	err := call(procHcsGetOperationResult, uintptr(op), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), err
}

func (computecoreBinding) cancelOperation(op hcsHandle) error {
	return call(procHcsCancelOperation, uintptr(op))
}

func (computecoreBinding) createComputeSystem(id, doc string, op hcsHandle) (hcsHandle, error) {
	pid, err := utf16(id)
	if err != nil {
		return 0, err
	}
	pdoc, err := utf16(doc)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(procHcsCreateComputeSystem, pid, pdoc, uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (computecoreBinding) openComputeSystem(id string) (hcsHandle, error) {
	pid, err := utf16(id)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(procHcsOpenComputeSystem, pid, windows.GENERIC_ALL, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (computecoreBinding) closeComputeSystem(sys hcsHandle) {
	callVoid(procHcsCloseComputeSystem, uintptr(sys))
}

func (computecoreBinding) startComputeSystem(sys, op hcsHandle) error {
	return call(procHcsStartComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (computecoreBinding) shutDownComputeSystem(sys, op hcsHandle) error {
	return call(procHcsShutDownComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (computecoreBinding) terminateComputeSystem(sys, op hcsHandle) error {
	return call(procHcsTerminateComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (computecoreBinding) modifyComputeSystem(sys, op hcsHandle, doc string) error {
	p, err := utf16(doc)
	if err != nil {
		return err
	}
	return call(procHcsModifyComputeSystem, uintptr(sys), uintptr(op), p, 0)
}

func (computecoreBinding) getComputeSystemProperties(sys, op hcsHandle, query string) error {
	p, err := utf16(query)
	if err != nil {
		return err
	}
	return call(procHcsGetComputeSystemProperties, uintptr(sys), uintptr(op), p)
}

func (computecoreBinding) setComputeSystemCallback(sys hcsHandle, key uintptr) error {
	return call(procHcsSetComputeSystemCallback, uintptr(sys), 0, key, eventCallback)
}

func (computecoreBinding) createProcess(sys hcsHandle, params string, op hcsHandle) (hcsHandle, error) {
	p, err := utf16(params)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(procHcsCreateProcess, uintptr(sys), p, uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (computecoreBinding) closeProcess(p hcsHandle) {
	callVoid(procHcsCloseProcess, uintptr(p))
}

func (computecoreBinding) signalProcess(p, op hcsHandle, options string) error {
	o, err := utf16(options)
	if err != nil {
		return err
	}
	return call(procHcsSignalProcess, uintptr(p), uintptr(op), o)
}

func (computecoreBinding) terminateProcess(p, op hcsHandle) error {
	return call(procHcsTerminateProcess, uintptr(p), uintptr(op), 0)
}

func (computecoreBinding) modifyProcess(p, op hcsHandle, doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	return call(procHcsModifyProcess, uintptr(p), uintptr(op), d)
}

func (computecoreBinding) getProcessProperties(p, op hcsHandle) error {
	return call(procHcsGetProcessProperties, uintptr(p), uintptr(op), 0)
}

func (computecoreBinding) setProcessCallback(p hcsHandle, key uintptr) error {
	return call(procHcsSetProcessCallback, uintptr(p), 0, key, eventCallback)
}

func (computecoreBinding) modifyServiceSettings(doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	var result *uint16
	err = call(procHcsModifyServiceSettings, d, uintptr(unsafe.Pointer(&result)))
	return withResult(err, takeString(result))
}

func (computecoreBinding) getServiceProperties(query string) (string, error) {
	q, err := utf16(query)
	if err != nil {
		return "", err
	}
	var result *uint16
	err = call(procHcsGetServiceProperties, q, uintptr(unsafe.Pointer(&result)))
	doc := takeString(result)
	return doc, withResult(err, doc)
}

// winGroupAffinity is GROUP_AFFINITY.
type winGroupAffinity struct {
	Mask     uintptr
	Group    uint16
	Reserved [3]uint16
}

// jobObjectAllAccess is JOB_OBJECT_ALL_ACCESS.
const jobObjectAllAccess = 0x1F003F

// setSiloAffinity opens the silo's job object by its NT name, as runhcs
// (hcsshim internal/jobobject Open with UseNTVariant), and sets
// JobObjectGroupInformationEx.
func (computecoreBinding) setSiloAffinity(id string, affinity []groupAffinity) error {
	name, err := windows.NewNTUnicodeString(`\Container_` + id)
	if err != nil {
		return err
	}
	oa := windows.OBJECT_ATTRIBUTES{ObjectName: name}
	oa.Length = uint32(unsafe.Sizeof(oa))
	var job windows.Handle
	if err := procNtOpenJobObject.Find(); err != nil {
		return loadError(err)
	}
	if r, _, _ := syscall.SyscallN(procNtOpenJobObject.Addr(), uintptr(unsafe.Pointer(&job)), jobObjectAllAccess, uintptr(unsafe.Pointer(&oa))); r != 0 {
		return windows.NTStatus(r)
	}
	defer windows.CloseHandle(job)
	groups := make([]winGroupAffinity, len(affinity))
	for i, a := range affinity {
		groups[i] = winGroupAffinity{Mask: uintptr(a.Mask), Group: a.Group}
	}
	_, err = windows.SetInformationJobObject(job, windows.JobObjectGroupInformationEx, uintptr(unsafe.Pointer(&groups[0])), uint32(len(groups))*uint32(unsafe.Sizeof(groups[0])))
	return err
}
