//go:build windows

package jobcontainer

import (
	"errors"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// This file, binding_process_windows.go and binding_users_windows.go are
// the binding: one Windows function per method, strings converted to and
// from UTF-16, failures returned as the Windows error. They make no
// decision. This file holds the job objects, completion ports, volume
// mount points and host facts.
//
// Every pointer handed to Windows is converted to uintptr inside the
// syscall.SyscallN expression and nowhere else (unsafe.Pointer rule 4):
// only there does Go keep the referent alive and the goroutine's stack
// where it is until the call returns. golang.org/x/sys/windows is used
// where its function takes typed pointers (it converts them in its own
// SyscallN expression); where it takes a uintptr for a pointer
// (SetInformationJobObject, QueryInformationJobObject,
// WaitForMultipleObjects) or lacks the function, the call is made here.
// (binding_wine_test.go runs the package's Windows tests with a stack move
// at every function entry to prove it.)

var (
	kernel32  = windows.NewLazySystemDLL("kernel32.dll")
	advapi32  = windows.NewLazySystemDLL("advapi32.dll")
	netapi32  = windows.NewLazySystemDLL("netapi32.dll")
	procCtrl  = kernel32.NewProc("CtrlRoutine")
	procOJob  = kernel32.NewProc("OpenJobObjectW")
	procCJob  = kernel32.NewProc("CreateJobObjectW")
	procSetJ  = kernel32.NewProc("SetInformationJobObject")
	procQryJ  = kernel32.NewProc("QueryInformationJobObject")
	procWFMO  = kernel32.NewProc("WaitForMultipleObjects")
	procCRT   = kernel32.NewProc("CreateRemoteThread")
	procUPTA  = kernel32.NewProc("UpdateProcThreadAttribute")
	procGQCS  = kernel32.NewProc("GetQueuedCompletionStatus")
	procLogon = advapi32.NewProc("LogonUserW")
	procLGGI  = netapi32.NewProc("NetLocalGroupGetInfo")
	procLGAM  = netapi32.NewProc("NetLocalGroupAddMembers")
	procUAdd  = netapi32.NewProc("NetUserAdd")
	procUDel  = netapi32.NewProc("NetUserDel")
	procNBuf  = netapi32.NewProc("NetApiBufferFree")
)

// winBinding calls Windows.
type winBinding struct{}

var _ binding = winBinding{}

// find loads proc; a missing DLL or function is its Windows error.
func find(proc *windows.LazyProc) error {
	if err := proc.Find(); err != nil {
		var e *windows.DLLError
		if errors.As(err, &e) && e.Err != nil {
			return e.Err
		}
		return err
	}
	return nil
}

// lastError is the error of a failed BOOL or HANDLE call: the thread's
// last error, never nil.
func lastError(e error) error {
	if errno, ok := e.(syscall.Errno); ok && errno == 0 {
		return syscall.EINVAL
	}
	return e
}

// netError is a NET_API_STATUS as an error.
func netError(r uintptr) error {
	if r == 0 {
		return nil
	}
	return syscall.Errno(r)
}

func utf16(s string) (*uint16, error) {
	if s == "" {
		return nil, nil
	}
	return windows.UTF16PtrFromString(s)
}

func (winBinding) createJobObject(name string) (handle, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, err
	}
	if err := find(procCJob); err != nil {
		return 0, err
	}
	r, _, e := syscall.SyscallN(procCJob.Addr(), 0, uintptr(unsafe.Pointer(n)))
	if r == 0 {
		return 0, lastError(e)
	}
	if e == windows.ERROR_ALREADY_EXISTS {
		windows.CloseHandle(windows.Handle(r))
		return 0, errJobExists
	}
	return handle(r), nil
}

// jobObjectAllAccess is JOB_OBJECT_ALL_ACCESS.
const jobObjectAllAccess = 0x1F003F

func (winBinding) openJobObject(name string) (handle, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return 0, err
	}
	if err := find(procOJob); err != nil {
		return 0, err
	}
	r, _, e := syscall.SyscallN(procOJob.Addr(), jobObjectAllAccess, 0, uintptr(unsafe.Pointer(n)))
	if r == 0 {
		return 0, lastError(e)
	}
	return handle(r), nil
}

func (winBinding) setJobLimits(job handle, flags uint32, jobMemory uint64) error {
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = flags
	info.JobMemoryLimit = uintptr(jobMemory)
	if err := find(procSetJ); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procSetJ.Addr(), uintptr(job), windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info))
	if r == 0 {
		return lastError(e)
	}
	return nil
}

// jobCPURate is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION.
type jobCPURate struct {
	ControlFlags uint32
	Value        uint32
}

func (winBinding) setJobCPURate(job handle, flags, value uint32) error {
	info := jobCPURate{ControlFlags: flags, Value: value}
	if err := find(procSetJ); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procSetJ.Addr(), uintptr(job), windows.JobObjectCpuRateControlInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info))
	if r == 0 {
		return lastError(e)
	}
	return nil
}

// winGroupAffinity is GROUP_AFFINITY.
type winGroupAffinity struct {
	Mask     uintptr
	Group    uint16
	Reserved [3]uint16
}

func (winBinding) setJobAffinity(job handle, groups []groupAffinity) error {
	if len(groups) == 0 {
		return syscall.EINVAL
	}
	info := make([]winGroupAffinity, len(groups))
	for i, g := range groups {
		info[i] = winGroupAffinity{Mask: uintptr(g.Mask), Group: g.Group}
	}
	if err := find(procSetJ); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procSetJ.Addr(), uintptr(job), windows.JobObjectGroupInformationEx, uintptr(unsafe.Pointer(&info[0])), uintptr(len(info))*unsafe.Sizeof(info[0]))
	if r == 0 {
		return lastError(e)
	}
	return nil
}

// jobCompletionPort is JOBOBJECT_ASSOCIATE_COMPLETION_PORT.
type jobCompletionPort struct {
	CompletionKey  uintptr
	CompletionPort windows.Handle
}

func (winBinding) associateCompletionPort(job, port handle, key uintptr) error {
	info := jobCompletionPort{CompletionKey: key, CompletionPort: windows.Handle(port)}
	if err := find(procSetJ); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procSetJ.Addr(), uintptr(job), windows.JobObjectAssociateCompletionPortInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info))
	if r == 0 {
		return lastError(e)
	}
	return nil
}

// jobBasicAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobBasicAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

func (winBinding) jobAccounting(job handle) (accounting, error) {
	var info jobBasicAccounting
	if err := find(procQryJ); err != nil {
		return accounting{}, err
	}
	r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), windows.JobObjectBasicAccountingInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0)
	if r == 0 {
		return accounting{}, lastError(e)
	}
	return accounting{
		TotalUserTime:   uint64(info.TotalUserTime),
		TotalKernelTime: uint64(info.TotalKernelTime),
		TotalProcesses:  info.TotalProcesses,
		ActiveProcesses: info.ActiveProcesses,
	}, nil
}

// jobBasicAndIO is JOBOBJECT_BASIC_AND_IO_ACCOUNTING_INFORMATION.
type jobBasicAndIO struct {
	Basic  jobBasicAccounting
	IoInfo windows.IO_COUNTERS
}

func (winBinding) jobIO(job handle) (ioCounters, error) {
	var info jobBasicAndIO
	if err := find(procQryJ); err != nil {
		return ioCounters{}, err
	}
	r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), windows.JobObjectBasicAndIoAccountingInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0)
	if r == 0 {
		return ioCounters{}, lastError(e)
	}
	return ioCounters{
		ReadOperations:  info.IoInfo.ReadOperationCount,
		WriteOperations: info.IoInfo.WriteOperationCount,
		ReadBytes:       info.IoInfo.ReadTransferCount,
		WriteBytes:      info.IoInfo.WriteTransferCount,
	}, nil
}

func (winBinding) peakJobMemory(job handle) (uint64, error) {
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := find(procQryJ); err != nil {
		return 0, err
	}
	r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0)
	if r == 0 {
		return 0, lastError(e)
	}
	return uint64(info.PeakJobMemoryUsed), nil
}

// jobObjectMemoryUsageInformation is the information class
// JOBOBJECT_MEMORY_USAGE_INFORMATION answers (hcsshim internal/winapi
// jobobject.go), which Microsoft does not document.
const jobObjectMemoryUsageInformation = 28

func (winBinding) jobMemory(job handle) (uint64, error) {
	var info struct{ JobMemory, PeakJobMemoryUsed uint64 }
	if err := find(procQryJ); err != nil {
		return 0, err
	}
	r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), jobObjectMemoryUsageInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0)
	if r == 0 {
		return 0, lastError(e)
	}
	return info.JobMemory, nil
}

func (winBinding) jobProcessIDs(job handle) ([]uint32, error) {
	if err := find(procQryJ); err != nil {
		return nil, err
	}
	// JOBOBJECT_BASIC_PROCESS_ID_LIST: two DWORDs (the processes
	// assigned, the ids listed), then ULONG_PTR ids; grown while the job
	// has more processes than room.
	for n := 64; ; {
		buf := make([]uintptr, 1+n)
		r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), windows.JobObjectBasicProcessIdList, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf))*unsafe.Sizeof(buf[0]), 0)
		if r == 0 && e != windows.ERROR_MORE_DATA {
			return nil, lastError(e)
		}
		assigned, listed := int(uint32(buf[0])), int(uint32(buf[0]>>32))
		if r != 0 && assigned <= listed && listed <= n {
			pids := make([]uint32, listed)
			for i := range pids {
				pids[i] = uint32(buf[1+i])
			}
			return pids, nil
		}
		n = max(2*n, assigned+16)
	}
}

func (winBinding) terminateJobObject(job handle, code uint32) error {
	return windows.TerminateJobObject(windows.Handle(job), code)
}

func (winBinding) assignProcessToJobObject(job, process handle) error {
	return windows.AssignProcessToJobObject(windows.Handle(job), windows.Handle(process))
}

func (winBinding) createCompletionPort() (handle, error) {
	h, err := windows.CreateIoCompletionPort(windows.InvalidHandle, 0, 0, 1)
	return handle(h), err
}

// jobMessage calls GetQueuedCompletionStatus itself: a job's message
// carries a process id where an OVERLAPPED pointer would be, which must
// not land in a Go pointer.
func (winBinding) jobMessage(port handle, timeoutMs uint32) (uint32, uintptr, error) {
	var msg uint32
	var key, pid uintptr
	if err := find(procGQCS); err != nil {
		return 0, 0, err
	}
	r, _, e := syscall.SyscallN(procGQCS.Addr(), uintptr(port), uintptr(unsafe.Pointer(&msg)), uintptr(unsafe.Pointer(&key)), uintptr(unsafe.Pointer(&pid)), uintptr(timeoutMs))
	if r == 0 {
		if e == windows.WAIT_TIMEOUT {
			return 0, 0, errTimeout
		}
		return 0, 0, lastError(e)
	}
	return msg, key, nil
}

func (winBinding) postMessage(port handle, key uintptr) error {
	return windows.PostQueuedCompletionStatus(windows.Handle(port), 0, key, nil)
}

func (winBinding) closeHandle(h handle) error {
	return windows.CloseHandle(windows.Handle(h))
}

func (winBinding) setVolumeMountPoint(dir, volume string) error {
	d, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	v, err := windows.UTF16PtrFromString(volume)
	if err != nil {
		return err
	}
	return windows.SetVolumeMountPoint(d, v)
}

func (winBinding) deleteVolumeMountPoint(dir string) error {
	d, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return err
	}
	return windows.DeleteVolumeMountPoint(d)
}

func (winBinding) activeProcessors() uint32 {
	return windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS)
}

func (winBinding) windowsDirectory() (string, error) {
	return windows.GetSystemWindowsDirectory()
}
