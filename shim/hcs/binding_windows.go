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

	kernel32                    = windows.NewLazySystemDLL("kernel32.dll")
	procSetInformationJobObject = kernel32.NewProc("SetInformationJobObject")

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
	HcsEnumerateComputeSystems              *windows.LazyProc
	HcsCreateProcess                        *windows.LazyProc
	HcsOpenProcess                          *windows.LazyProc
	HcsGetProcessInfo                       *windows.LazyProc
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
		HcsEnumerateComputeSystems:              dll.NewProc("HcsEnumerateComputeSystems"),
		HcsCreateProcess:                        dll.NewProc("HcsCreateProcess"),
		HcsOpenProcess:                          dll.NewProc("HcsOpenProcess"),
		HcsGetProcessInfo:                       dll.NewProc("HcsGetProcessInfo"),
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

// Every call below converts its pointers to uintptr inside the
// syscall.SyscallN expression and nowhere else (unsafe.Pointer rule 4):
// only there does Go keep the referent alive and the goroutine's stack
// where it is until the function returns. A uintptr held in a variable or
// passed through a function is invisible to the collector and goes stale
// when the stack moves, and HCS would write into freed memory. The one
// exception is the proc's address, which never moves.
// (shim/hcs's Windows tests run under Wine with a stack move at every
// function entry to prove it: binding_wine_test.go.)

func loadError(err error) error {
	if e, ok := err.(*windows.DLLError); ok && e.Err != nil {
		return e.Err
	}
	return err
}

// find loads proc (a host without the Containers feature has no
// computecore.dll: the load error is ERROR_MOD_NOT_FOUND).
func find(proc *windows.LazyProc) error {
	if err := proc.Find(); err != nil {
		return loadError(err)
	}
	return nil
}

func hresult(r uintptr) error {
	if int32(r) < 0 {
		return syscall.Errno(uint32(r))
	}
	return nil
}

// utf16 is s as a NUL-terminated UTF-16 string, nil for "" (HCS takes
// NULL for an absent document). It is a typed pointer, which the
// collector sees; callers convert it in the call expression.
func utf16(s string) (*uint16, error) {
	if s == "" {
		return nil, nil
	}
	return windows.UTF16PtrFromString(s)
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
	if err := find(b.HcsCreateOperation); err != nil {
		return 0, err
	}
	r, _, err := syscall.SyscallN(b.HcsCreateOperation.Addr(), 0, 0)
	if r == 0 {
		return 0, err
	}
	return hcsHandle(r), nil
}

func (b computecoreBinding) closeOperation(op hcsHandle) {
	if find(b.HcsCloseOperation) == nil {
		syscall.SyscallN(b.HcsCloseOperation.Addr(), uintptr(op))
	}
}

func (b computecoreBinding) waitOperation(op hcsHandle, timeoutMs uint32) (string, error) {
	if err := find(b.HcsWaitForOperationResult); err != nil {
		return "", err
	}
	var doc *uint16
	r, _, _ := syscall.SyscallN(b.HcsWaitForOperationResult.Addr(), uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), hresult(r)
}

func (b computecoreBinding) waitOperationProcess(op hcsHandle, timeoutMs uint32) (processPipes, string, error) {
	if err := find(b.HcsWaitForOperationResultAndProcessInfo); err != nil {
		return processPipes{}, "", err
	}
	var info hcsProcessInformation
	var doc *uint16
	r, _, _ := syscall.SyscallN(b.HcsWaitForOperationResultAndProcessInfo.Addr(), uintptr(op), uintptr(timeoutMs), uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc)))
	err := hresult(r)
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
	if perr := errors.Join(ierr, oerr, eerr); err == nil && perr != nil {
		err = &stdioError{perr}
	}
	return pipes, takeString(doc), err
}

// openPipe wraps a pipe handle HCS handed over for overlapped I/O, as
// hcsshim does; it closes the handle if that fails. A zero handle, or
// INVALID_HANDLE_VALUE (HcsGetProcessInfo's word for it), is a pipe not
// asked for.
func openPipe(h windows.Handle) (io.ReadWriteCloser, error) {
	if h == 0 || h == windows.InvalidHandle {
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
	if err := find(b.HcsGetOperationResult); err != nil {
		return "", err
	}
	var doc *uint16
	r, _, _ := syscall.SyscallN(b.HcsGetOperationResult.Addr(), uintptr(op), uintptr(unsafe.Pointer(&doc)))
	return takeString(doc), hresult(r)
}

func (b computecoreBinding) cancelOperation(op hcsHandle) error {
	if err := find(b.HcsCancelOperation); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(b.HcsCancelOperation.Addr(), uintptr(op))
	return hresult(r)
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
	if err := find(b.HcsCreateComputeSystem); err != nil {
		return 0, err
	}
	var h hcsHandle
	r, _, _ := syscall.SyscallN(b.HcsCreateComputeSystem.Addr(), uintptr(unsafe.Pointer(pid)), uintptr(unsafe.Pointer(pdoc)), uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, hresult(r)
}

func (b computecoreBinding) openComputeSystem(id string) (hcsHandle, error) {
	pid, err := utf16(id)
	if err != nil {
		return 0, err
	}
	if err := find(b.HcsOpenComputeSystem); err != nil {
		return 0, err
	}
	var h hcsHandle
	r, _, _ := syscall.SyscallN(b.HcsOpenComputeSystem.Addr(), uintptr(unsafe.Pointer(pid)), windows.GENERIC_ALL, uintptr(unsafe.Pointer(&h)))
	return h, hresult(r)
}

func (b computecoreBinding) closeComputeSystem(sys hcsHandle) {
	if find(b.HcsCloseComputeSystem) == nil {
		syscall.SyscallN(b.HcsCloseComputeSystem.Addr(), uintptr(sys))
	}
}

// handleOp calls proc(handle, op, NULL): the system and process calls
// that take no pointer.
func handleOp(proc *windows.LazyProc, h, op hcsHandle) error {
	if err := find(proc); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(proc.Addr(), uintptr(h), uintptr(op), 0)
	return hresult(r)
}

// handleOpDoc calls proc(handle, op, doc).
func handleOpDoc(proc *windows.LazyProc, h, op hcsHandle, doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	if err := find(proc); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(proc.Addr(), uintptr(h), uintptr(op), uintptr(unsafe.Pointer(d)))
	return hresult(r)
}

func (b computecoreBinding) startComputeSystem(sys, op hcsHandle) error {
	return handleOp(b.HcsStartComputeSystem, sys, op)
}

func (b computecoreBinding) shutDownComputeSystem(sys, op hcsHandle) error {
	return handleOp(b.HcsShutDownComputeSystem, sys, op)
}

func (b computecoreBinding) terminateComputeSystem(sys, op hcsHandle) error {
	return handleOp(b.HcsTerminateComputeSystem, sys, op)
}

func (b computecoreBinding) modifyComputeSystem(sys, op hcsHandle, doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	if err := find(b.HcsModifyComputeSystem); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(b.HcsModifyComputeSystem.Addr(), uintptr(sys), uintptr(op), uintptr(unsafe.Pointer(d)), 0)
	return hresult(r)
}

func (b computecoreBinding) getComputeSystemProperties(sys, op hcsHandle, query string) error {
	return handleOpDoc(b.HcsGetComputeSystemProperties, sys, op, query)
}

// enumerateComputeSystems calls HcsEnumerateComputeSystems(query, op);
// the list is the operation's result document, which waitOperation takes
// and frees.
func (b computecoreBinding) enumerateComputeSystems(query string, op hcsHandle) error {
	q, err := utf16(query)
	if err != nil {
		return err
	}
	if err := find(b.HcsEnumerateComputeSystems); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(b.HcsEnumerateComputeSystems.Addr(), uintptr(unsafe.Pointer(q)), uintptr(op))
	return hresult(r)
}

// setCallback calls proc(handle, HcsEventOptionNone, key, the callback).
func setCallback(proc *windows.LazyProc, h hcsHandle, key uintptr) error {
	if err := find(proc); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(proc.Addr(), uintptr(h), 0, key, eventCallback)
	return hresult(r)
}

func (b computecoreBinding) setComputeSystemCallback(sys hcsHandle, key uintptr) error {
	return setCallback(b.HcsSetComputeSystemCallback, sys, key)
}

func (b computecoreBinding) createProcess(sys hcsHandle, params string, op hcsHandle) (hcsHandle, error) {
	p, err := utf16(params)
	if err != nil {
		return 0, err
	}
	if err := find(b.HcsCreateProcess); err != nil {
		return 0, err
	}
	var h hcsHandle
	r, _, _ := syscall.SyscallN(b.HcsCreateProcess.Addr(), uintptr(sys), uintptr(unsafe.Pointer(p)), uintptr(op), 0, uintptr(unsafe.Pointer(&h)))
	return h, hresult(r)
}

func (b computecoreBinding) openProcess(sys hcsHandle, pid uint32) (hcsHandle, error) {
	if err := find(b.HcsOpenProcess); err != nil {
		return 0, err
	}
	var h hcsHandle
	r, _, _ := syscall.SyscallN(b.HcsOpenProcess.Addr(), uintptr(sys), uintptr(pid), windows.GENERIC_ALL, uintptr(unsafe.Pointer(&h)))
	return h, hresult(r)
}

func (b computecoreBinding) getProcessInfo(p, op hcsHandle) error {
	if err := find(b.HcsGetProcessInfo); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(b.HcsGetProcessInfo.Addr(), uintptr(p), uintptr(op))
	return hresult(r)
}

func (b computecoreBinding) closeProcess(p hcsHandle) {
	if find(b.HcsCloseProcess) == nil {
		syscall.SyscallN(b.HcsCloseProcess.Addr(), uintptr(p))
	}
}

func (b computecoreBinding) signalProcess(p, op hcsHandle, options string) error {
	return handleOpDoc(b.HcsSignalProcess, p, op, options)
}

func (b computecoreBinding) terminateProcess(p, op hcsHandle) error {
	return handleOp(b.HcsTerminateProcess, p, op)
}

func (b computecoreBinding) modifyProcess(p, op hcsHandle, doc string) error {
	return handleOpDoc(b.HcsModifyProcess, p, op, doc)
}

func (b computecoreBinding) getProcessProperties(p, op hcsHandle) error {
	return handleOp(b.HcsGetProcessProperties, p, op)
}

func (b computecoreBinding) setProcessCallback(p hcsHandle, key uintptr) error {
	return setCallback(b.HcsSetProcessCallback, p, key)
}

func (b computecoreBinding) modifyServiceSettings(doc string) error {
	d, err := utf16(doc)
	if err != nil {
		return err
	}
	if err := find(b.HcsModifyServiceSettings); err != nil {
		return err
	}
	var result *uint16
	r, _, _ := syscall.SyscallN(b.HcsModifyServiceSettings.Addr(), uintptr(unsafe.Pointer(d)), uintptr(unsafe.Pointer(&result)))
	return withResult(hresult(r), takeString(result))
}

func (b computecoreBinding) getServiceProperties(query string) (string, error) {
	q, err := utf16(query)
	if err != nil {
		return "", err
	}
	if err := find(b.HcsGetServiceProperties); err != nil {
		return "", err
	}
	var result *uint16
	r, _, _ := syscall.SyscallN(b.HcsGetServiceProperties.Addr(), uintptr(unsafe.Pointer(q)), uintptr(unsafe.Pointer(&result)))
	doc := takeString(result)
	return doc, withResult(hresult(r), doc)
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
	if err := find(procNtOpenJobObject); err != nil {
		return err
	}
	var job windows.Handle
	if r, _, _ := syscall.SyscallN(procNtOpenJobObject.Addr(), uintptr(unsafe.Pointer(&job)), jobObjectAllAccess, uintptr(unsafe.Pointer(&oa))); r != 0 {
		return windows.NTStatus(r)
	}
	defer windows.CloseHandle(job)
	groups := make([]winGroupAffinity, len(affinity))
	for i, a := range affinity {
		groups[i] = winGroupAffinity{Mask: uintptr(a.Mask), Group: a.Group}
	}
	// x/sys's SetInformationJobObject takes the pointer as a uintptr
	// parameter, so it is converted in this proc's call expression instead
	// (unsafe.Pointer rule 4).
	if err := find(procSetInformationJobObject); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procSetInformationJobObject.Addr(), uintptr(job), windows.JobObjectGroupInformationEx, uintptr(unsafe.Pointer(&groups[0])), uintptr(uint32(len(groups))*uint32(unsafe.Sizeof(groups[0]))))
	if r == 0 {
		return e
	}
	return nil
}
