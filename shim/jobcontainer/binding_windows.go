//go:build windows

package jobcontainer

import (
	"errors"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// This file is the binding: one Windows function per method, strings
// converted to and from UTF-16, failures returned as the Windows error.
// It makes no decision.
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

// Process creation flags: suspended until the process is in the job;
// away from the shim's own job, if it is in one (as runhcs).
const createFlags = windows.CREATE_SUSPENDED | windows.CREATE_UNICODE_ENVIRONMENT |
	windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_BREAKAWAY_FROM_JOB

// envBlock is env as CreateProcess's Unicode environment block.
func envBlock(env []string) (*uint16, error) {
	var block []uint16
	for _, kv := range env {
		s, err := windows.UTF16FromString(kv)
		if err != nil {
			return nil, err
		}
		block = append(block, s...)
	}
	block = append(block, 0)
	if len(env) == 0 {
		block = append(block, 0)
	}
	return &block[0], nil
}

func (winBinding) createProcess(p startParams) (started, error) {
	app, err := windows.UTF16PtrFromString(p.application)
	if err != nil {
		return started{}, err
	}
	line, err := windows.UTF16PtrFromString(p.commandLine)
	if err != nil {
		return started{}, err
	}
	dir, err := utf16(p.dir)
	if err != nil {
		return started{}, err
	}
	env, err := envBlock(p.env)
	if err != nil {
		return started{}, err
	}
	attrs, err := windows.NewProcThreadAttributeList(1)
	if err != nil {
		return started{}, err
	}
	defer attrs.Delete()
	si := &windows.StartupInfoEx{}
	si.Cb = uint32(unsafe.Sizeof(*si))
	inherit := false
	if p.console != 0 {
		// The console is the process's stdio; the pseudo console's handle
		// is the attribute's value itself.
		if err := find(procUPTA); err != nil {
			return started{}, err
		}
		r, _, e := syscall.SyscallN(procUPTA.Addr(), uintptr(unsafe.Pointer(attrs.List())), 0, windows.PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE, uintptr(p.console), unsafe.Sizeof(p.console), 0, 0)
		if r == 0 {
			return started{}, lastError(e)
		}
	} else {
		// Only the pipes are inherited (the handle list), not every
		// inheritable handle of the shim.
		si.Flags = windows.STARTF_USESTDHANDLES
		var handles []windows.Handle
		for _, s := range []struct {
			f  *os.File
			to *windows.Handle
		}{{p.stdin, &si.StdInput}, {p.stdout, &si.StdOutput}, {p.stderr, &si.StdErr}} {
			if s.f != nil {
				*s.to = windows.Handle(s.f.Fd())
				handles = append(handles, *s.to)
			}
		}
		if len(handles) > 0 {
			inherit = true
			if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&handles[0]), uintptr(len(handles))*unsafe.Sizeof(handles[0])); err != nil {
				return started{}, err
			}
		}
	}
	si.ProcThreadAttributeList = attrs.List()
	var pi windows.ProcessInformation
	if err := windows.CreateProcessAsUser(windows.Token(p.token), app, line, nil, nil, inherit, createFlags, env, dir, &si.StartupInfo, &pi); err != nil {
		return started{}, err
	}
	return started{process: handle(pi.Process), thread: handle(pi.Thread), pid: pi.ProcessId}, nil
}

func (winBinding) resumeThread(thread handle) error {
	_, err := windows.ResumeThread(windows.Handle(thread))
	return err
}

func (winBinding) waitProcess(process, cancel handle) (bool, error) {
	handles := []windows.Handle{windows.Handle(process), windows.Handle(cancel)}
	if err := find(procWFMO); err != nil {
		return false, err
	}
	r, _, e := syscall.SyscallN(procWFMO.Addr(), uintptr(len(handles)), uintptr(unsafe.Pointer(&handles[0])), 0, windows.INFINITE)
	switch uint32(r) {
	case windows.WAIT_OBJECT_0:
		return true, nil
	case windows.WAIT_OBJECT_0 + 1:
		return false, nil
	}
	return false, lastError(e)
}

func (winBinding) exitCode(process handle) (uint32, error) {
	var code uint32
	err := windows.GetExitCodeProcess(windows.Handle(process), &code)
	return code, err
}

func (winBinding) terminateProcess(process handle, code uint32) error {
	return windows.TerminateProcess(windows.Handle(process), code)
}

// ctrlAccess are the rights CreateRemoteThread needs.
const ctrlAccess = windows.PROCESS_CREATE_THREAD | windows.PROCESS_QUERY_INFORMATION |
	windows.PROCESS_VM_OPERATION | windows.PROCESS_VM_WRITE | windows.PROCESS_VM_READ

func (winBinding) openProcess(pid uint32) (handle, error) {
	h, err := windows.OpenProcess(ctrlAccess, false, pid)
	return handle(h), err
}

// ctrlEvent starts kernel32!CtrlRoutine in the process: kernel32 is at
// the same address in every process of a boot, so the shim's own address
// of it is the target's (runhcs's signalProcess relies on the same).
func (winBinding) ctrlEvent(process handle, event uint32) error {
	if err := find(procCtrl); err != nil {
		return err
	}
	if err := find(procCRT); err != nil {
		return err
	}
	r, _, e := syscall.SyscallN(procCRT.Addr(), uintptr(process), 0, 0, procCtrl.Addr(), uintptr(event), 0, 0)
	if r == 0 {
		return lastError(e)
	}
	return windows.CloseHandle(windows.Handle(r))
}

func (winBinding) createEvent() (handle, error) {
	h, err := windows.CreateEvent(nil, 1, 0, nil)
	return handle(h), err
}

func (winBinding) setEvent(event handle) error {
	return windows.SetEvent(windows.Handle(event))
}

func (winBinding) createPseudoConsole(width, height uint16, in, out *os.File) (handle, error) {
	var h windows.Handle
	size := windows.Coord{X: int16(width), Y: int16(height)}
	err := windows.CreatePseudoConsole(size, windows.Handle(in.Fd()), windows.Handle(out.Fd()), 0, &h)
	return handle(h), err
}

func (winBinding) resizePseudoConsole(console handle, width, height uint16) error {
	return windows.ResizePseudoConsole(windows.Handle(console), windows.Coord{X: int16(width), Y: int16(height)})
}

func (winBinding) closePseudoConsole(console handle) {
	windows.ClosePseudoConsole(windows.Handle(console))
}

func (winBinding) systemProcesses() ([]processRecord, error) {
	// SYSTEM_PROCESS_INFORMATION entries, grown while they do not fit;
	// uint64s keep the entries aligned.
	size := uint32(512 << 10)
	for {
		buf := make([]uint64, size/8+1)
		err := windows.NtQuerySystemInformation(windows.SystemProcessInformation, unsafe.Pointer(&buf[0]), uint32(len(buf)*8), &size)
		if errors.Is(err, windows.STATUS_INFO_LENGTH_MISMATCH) {
			size += 64 << 10
			continue
		}
		if err != nil {
			return nil, err
		}
		return parseProcesses(unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8))
	}
}

// parseProcesses reads the entries of a SystemProcessInformation buffer.
func parseProcesses(b []byte) ([]processRecord, error) {
	var out []processRecord
	for off := 0; ; {
		if off+int(unsafe.Sizeof(windows.SYSTEM_PROCESS_INFORMATION{})) > len(b) {
			return nil, errors.New("a process entry runs past the buffer")
		}
		e := (*windows.SYSTEM_PROCESS_INFORMATION)(unsafe.Pointer(&b[off]))
		out = append(out, processRecord{
			PID:          uint32(e.UniqueProcessID),
			ImageName:    e.ImageName.String(),
			CreateTime:   e.CreateTime,
			UserTime:     e.UserTime,
			KernelTime:   e.KernelTime,
			PrivateBytes: uint64(e.PrivatePageCount),
			WorkingSet:   uint64(e.WorkingSetSize),
			PrivateSet:   uint64(e.WorkingSetPrivateSize),
		})
		if e.NextEntryOffset == 0 {
			return out, nil
		}
		off += int(e.NextEntryOffset)
	}
}

func (winBinding) closeHandle(h handle) error {
	return windows.CloseHandle(windows.Handle(h))
}

func (winBinding) logonUser(user, domain, password string, logonType uint32) (handle, error) {
	u, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return 0, err
	}
	d, err := utf16(domain)
	if err != nil {
		return 0, err
	}
	p, err := utf16(password)
	if err != nil {
		return 0, err
	}
	if err := find(procLogon); err != nil {
		return 0, err
	}
	var t windows.Token
	r, _, e := syscall.SyscallN(procLogon.Addr(), uintptr(unsafe.Pointer(u)), uintptr(unsafe.Pointer(d)), uintptr(unsafe.Pointer(p)), uintptr(logonType), 0, uintptr(unsafe.Pointer(&t)))
	if r == 0 {
		return 0, lastError(e)
	}
	return handle(t), nil
}

func (winBinding) processToken() (handle, error) {
	var t windows.Token
	err := windows.OpenProcessToken(windows.CurrentProcess(), windows.TOKEN_ALL_ACCESS, &t)
	return handle(t), err
}

func (winBinding) tokenUser(token handle) (string, error) {
	u, err := windows.Token(token).GetTokenUser()
	if err != nil {
		return "", err
	}
	return u.User.Sid.String(), nil
}

func (winBinding) userEnvironment(token handle) ([]string, error) {
	var block *uint16
	if err := windows.CreateEnvironmentBlock(&block, windows.Token(token), false); err != nil {
		return nil, err
	}
	defer windows.DestroyEnvironmentBlock(block)
	// NUL-terminated strings, ended by an empty one; the block is
	// Windows' memory.
	var env []string
	for p := unsafe.Pointer(block); ; {
		s := windows.UTF16PtrToString((*uint16)(p))
		if s == "" {
			return env, nil
		}
		env = append(env, s)
		n := 0
		for *(*uint16)(unsafe.Add(p, 2*n)) != 0 {
			n++
		}
		p = unsafe.Add(p, 2*(n+1))
	}
}

// Net API status codes.
const (
	nerrGroupNotFound  = 2220
	nerrUserNotFound   = 2221
	errorNoSuchAlias   = 1376
	errorMemberInAlias = 1378
)

func (winBinding) localGroupExists(name string) (bool, error) {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return false, err
	}
	if err := find(procLGGI); err != nil {
		return false, err
	}
	var buf *byte
	r, _, _ := syscall.SyscallN(procLGGI.Addr(), 0, uintptr(unsafe.Pointer(n)), 0, uintptr(unsafe.Pointer(&buf)))
	if buf != nil {
		syscall.SyscallN(procNBuf.Addr(), uintptr(unsafe.Pointer(buf)))
	}
	switch r {
	case 0:
		return true, nil
	case nerrGroupNotFound, errorNoSuchAlias:
		return false, nil
	}
	return false, netError(r)
}

// userInfo1 is USER_INFO_1.
type userInfo1 struct {
	Name        *uint16
	Password    *uint16
	PasswordAge uint32
	Priv        uint32
	HomeDir     *uint16
	Comment     *uint16
	Flags       uint32
	ScriptPath  *uint16
}

// USER_PRIV_USER; UF_SCRIPT (required), UF_NORMAL_ACCOUNT,
// UF_DONT_EXPIRE_PASSWD.
const (
	userPrivUser   = 1
	userFlags      = 0x0001 | 0x0200 | 0x10000
	userCommentTxt = "temporary user of a winproc HostProcess container"
)

func (winBinding) addUser(name, password string) error {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return err
	}
	p, err := windows.UTF16PtrFromString(password)
	if err != nil {
		return err
	}
	c, err := windows.UTF16PtrFromString(userCommentTxt)
	if err != nil {
		return err
	}
	if err := find(procUAdd); err != nil {
		return err
	}
	info := userInfo1{Name: n, Password: p, Priv: userPrivUser, Comment: c, Flags: userFlags}
	r, _, _ := syscall.SyscallN(procUAdd.Addr(), 0, 1, uintptr(unsafe.Pointer(&info)), 0)
	return netError(r)
}

func (winBinding) addGroupMember(group, user string) error {
	g, err := windows.UTF16PtrFromString(group)
	if err != nil {
		return err
	}
	u, err := windows.UTF16PtrFromString(user)
	if err != nil {
		return err
	}
	if err := find(procLGAM); err != nil {
		return err
	}
	// LOCALGROUP_MEMBERS_INFO_3: the member by name.
	members := []*uint16{u}
	r, _, _ := syscall.SyscallN(procLGAM.Addr(), 0, uintptr(unsafe.Pointer(g)), 3, uintptr(unsafe.Pointer(&members[0])), 1)
	if r == errorMemberInAlias {
		return nil
	}
	return netError(r)
}

func (winBinding) deleteUser(name string) error {
	n, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return err
	}
	if err := find(procUDel); err != nil {
		return err
	}
	r, _, _ := syscall.SyscallN(procUDel.Addr(), 0, uintptr(unsafe.Pointer(n)))
	if r == nerrUserNotFound {
		return errUserNotFound
	}
	return netError(r)
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
