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
	ntdll = windows.NewLazySystemDLL("ntdll.dll")

	procNtOpenJobObject = ntdll.NewProc("NtOpenJobObject")

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

// computecoreBinding calls the functions of one computecore.dll: the
// system's (newComputecoreBinding(computecoreDLL())), or in a test a
// stand-in of it.
type computecoreBinding struct {
	HcsCreateOperation                      *windows.LazyProc
	HcsCloseOperation                       *windows.LazyProc
	HcsWaitForOperationResult               *windows.LazyProc
	HcsWaitForOperationResultAndProcessInfo *windows.LazyProc
	HcsGetOperationResult                   *windows.LazyProc
	HcsCancelOperation                      *windows.LazyProc
	HcsCreateComputeSystem                  *windows.LazyProc
	HcsOpenComputeSystem                    *windows.LazyProc
	HcsCloseComputeSystem                   *windows.LazyProc
	HcsStartComputeSystem                   *windows.LazyProc
	HcsShutDownComputeSystem                *windows.LazyProc
	HcsTerminateComputeSystem               *windows.LazyProc
	HcsModifyComputeSystem                  *windows.LazyProc
	HcsGetComputeSystemProperties           *windows.LazyProc
	HcsSetComputeSystemCallback             *windows.LazyProc
	HcsCreateProcess                        *windows.LazyProc
	HcsCloseProcess                         *windows.LazyProc
	HcsSignalProcess                        *windows.LazyProc
	HcsTerminateProcess                     *windows.LazyProc
	HcsModifyProcess                        *windows.LazyProc
	HcsGetProcessProperties                 *windows.LazyProc
	HcsSetProcessCallback                   *windows.LazyProc
	HcsModifyServiceSettings                *windows.LazyProc
	HcsGetServiceProperties                 *windows.LazyProc
}

var _ binding = computecoreBinding{}

// computecoreDLL is HCS's, from System32 only.
func computecoreDLL() *windows.LazyDLL { return windows.NewLazySystemDLL("computecore.dll") }

func newComputecoreBinding(dll *windows.LazyDLL) computecoreBinding {
	return computecoreBinding{
		HcsCreateOperation:                      dll.NewProc("HcsCreateOperation"),
		HcsCloseOperation:                       dll.NewProc("HcsCloseOperation"),
		HcsWaitForOperationResult:               dll.NewProc("HcsWaitForOperationResult"),
		HcsWaitForOperationResultAndProcessInfo: dll.NewProc("HcsWaitForOperationResultAndProcessInfo"),
		HcsGetOperationResult:                   dll.NewProc("HcsGetOperationResult"),
		HcsCancelOperation:                      dll.NewProc("HcsCancelOperation"),
		HcsCreateComputeSystem:                  dll.NewProc("HcsCreateComputeSystem"),
		HcsOpenComputeSystem:                    dll.NewProc("HcsOpenComputeSystem"),
		HcsCloseComputeSystem:                   dll.NewProc("HcsCloseComputeSystem"),
		HcsStartComputeSystem:                   dll.NewProc("HcsStartComputeSystem"),
		HcsShutDownComputeSystem:                dll.NewProc("HcsShutDownComputeSystem"),
		HcsTerminateComputeSystem:               dll.NewProc("HcsTerminateComputeSystem"),
		HcsModifyComputeSystem:                  dll.NewProc("HcsModifyComputeSystem"),
		HcsGetComputeSystemProperties:           dll.NewProc("HcsGetComputeSystemProperties"),
		HcsSetComputeSystemCallback:             dll.NewProc("HcsSetComputeSystemCallback"),
		HcsCreateProcess:                        dll.NewProc("HcsCreateProcess"),
		HcsCloseProcess:                         dll.NewProc("HcsCloseProcess"),
		HcsSignalProcess:                        dll.NewProc("HcsSignalProcess"),
		HcsTerminateProcess:                     dll.NewProc("HcsTerminateProcess"),
		HcsModifyProcess:                        dll.NewProc("HcsModifyProcess"),
		HcsGetProcessProperties:                 dll.NewProc("HcsGetProcessProperties"),
		HcsSetProcessCallback:                   dll.NewProc("HcsSetProcessCallback"),
		HcsModifyServiceSettings:                dll.NewProc("HcsModifyServiceSettings"),
		HcsGetServiceProperties:                 dll.NewProc("HcsGetServiceProperties"),
	}
}

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

func (b computecoreBinding) createOperation() (hcsHandle, error) {
	if err := b.HcsCreateOperation.Find(); err != nil {
		return 0, loadError(err)
	}
	r, _, err := syscall.SyscallN(b.HcsCreateOperation.Addr(), 0, 0)
	if r == 0 {
		return 0, err
	}
	return hcsHandle(r), nil
}

func (b computecoreBinding) closeOperation(op hcsHandle) {
	callVoid(b.HcsCloseOperation, uintptr(op))
}

func (b computecoreBinding) waitOperation(op hcsHandle, timeoutMs uint32) (string, error) {
	var doc *uint16
	err := call(b.HcsWaitForOperationResult, uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), err
}

func (b computecoreBinding) waitOperationProcess(op hcsHandle, timeoutMs uint32) (processPipes, string, error) {
	var info hcsProcessInformation
	var doc *uint16
	err := call(b.HcsWaitForOperationResultAndProcessInfo, uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc)))
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

func (b computecoreBinding) operationResult(op hcsHandle) (string, error) {
	var doc *uint16
	err := call(b.HcsGetOperationResult, uintptr(op), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), err
}

func (b computecoreBinding) cancelOperation(op hcsHandle) error {
	return call(b.HcsCancelOperation, uintptr(op))
}

func (b computecoreBinding) createComputeSystem(id, doc string, op hcsHandle) (hcsHandle, error) {
	pid, err := utf16(id)
	if err != nil {
		return 0, err
	}
	pdoc, err := utf16(doc)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(b.HcsCreateComputeSystem, pid, pdoc, uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (b computecoreBinding) openComputeSystem(id string) (hcsHandle, error) {
	pid, err := utf16(id)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(b.HcsOpenComputeSystem, pid, windows.GENERIC_ALL, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (b computecoreBinding) closeComputeSystem(sys hcsHandle) {
	callVoid(b.HcsCloseComputeSystem, uintptr(sys))
}

func (b computecoreBinding) startComputeSystem(sys, op hcsHandle) error {
	return call(b.HcsStartComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (b computecoreBinding) shutDownComputeSystem(sys, op hcsHandle) error {
	return call(b.HcsShutDownComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (b computecoreBinding) terminateComputeSystem(sys, op hcsHandle) error {
	return call(b.HcsTerminateComputeSystem, uintptr(sys), uintptr(op), 0)
}

func (b computecoreBinding) modifyComputeSystem(sys, op hcsHandle, doc string) error {
	p, err := utf16(doc)
	if err != nil {
		return err
	}
	return call(b.HcsModifyComputeSystem, uintptr(sys), uintptr(op), p, 0)
}

func (b computecoreBinding) getComputeSystemProperties(sys, op hcsHandle, query string) error {
	p, err := utf16(query)
	if err != nil {
		return err
	}
	return call(b.HcsGetComputeSystemProperties, uintptr(sys), uintptr(op), p)
}

func (b computecoreBinding) setComputeSystemCallback(sys hcsHandle, key uintptr) error {
	return call(b.HcsSetComputeSystemCallback, uintptr(sys), 0, key, eventCallback)
}

func (b computecoreBinding) createProcess(sys hcsHandle, params string, op hcsHandle) (hcsHandle, error) {
	p, err := utf16(params)
	if err != nil {
		return 0, err
	}
	var h hcsHandle
	err = call(b.HcsCreateProcess, uintptr(sys), p, uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, err
}

func (b computecoreBinding) closeProcess(p hcsHandle) {
	callVoid(b.HcsCloseProcess, uintptr(p))
}

func (b computecoreBinding) signalProcess(p, op hcsHandle, options string) error {
	o, err := utf16(options)
	if err != nil {
		return err
	}
	return call(b.HcsSignalProcess, uintptr(p), uintptr(op), o)
}

func (b computecoreBinding) terminateProcess(p, op hcsHandle) error {
	return call(b.HcsTerminateProcess, uintptr(p), uintptr(op), 0)
}

func (b computecoreBinding) modifyProcess(p, op hcsHandle, doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	return call(b.HcsModifyProcess, uintptr(p), uintptr(op), d)
}

func (b computecoreBinding) getProcessProperties(p, op hcsHandle) error {
	return call(b.HcsGetProcessProperties, uintptr(p), uintptr(op), 0)
}

func (b computecoreBinding) setProcessCallback(p hcsHandle, key uintptr) error {
	return call(b.HcsSetProcessCallback, uintptr(p), 0, key, eventCallback)
}

func (b computecoreBinding) modifyServiceSettings(doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	var result *uint16
	err = call(b.HcsModifyServiceSettings, d, uintptr(unsafe.Pointer(&result)))
	return withResult(err, takeString(result))
}

func (b computecoreBinding) getServiceProperties(query string) (string, error) {
	q, err := utf16(query)
	if err != nil {
		return "", err
	}
	var result *uint16
	err = call(b.HcsGetServiceProperties, q, uintptr(unsafe.Pointer(&result)))
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
func (b computecoreBinding) setSiloAffinity(id string, affinity []groupAffinity) error {
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
