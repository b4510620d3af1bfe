package jobcontainer

import (
	"errors"
	"os"
)

// handle is a Windows handle: a job object, an I/O completion port, a
// process or thread, a token, an event, a pseudo console.
type handle uintptr

// binding is the Windows API the backend calls, one method per function
// (kernel32, advapi32, userenv, netapi32, ntdll), with strings as Go
// strings and failures as the Windows error (a syscall.Errno). On Windows,
// binding_windows.go implements it with system calls and nothing else;
// the Linux tests use a fake. Every decision is the portable files'.
type binding interface {
	// createJobObject is CreateJobObjectW with the name. A job of that
	// name that exists already is errJobExists (its handle closed).
	createJobObject(name string) (handle, error)
	// openJobObject is OpenJobObjectW(JOB_OBJECT_ALL_ACCESS).
	openJobObject(name string) (handle, error)
	// setJobLimits is SetInformationJobObject(JobObjectExtendedLimitInformation)
	// with the limit flags and the job's commit limit in bytes.
	setJobLimits(job handle, flags uint32, jobMemory uint64) error
	// setJobCPURate is SetInformationJobObject(JobObjectCpuRateControlInformation).
	setJobCPURate(job handle, flags, value uint32) error
	// setJobAffinity is SetInformationJobObject(JobObjectGroupInformationEx).
	setJobAffinity(job handle, groups []groupAffinity) error
	// associateCompletionPort is
	// SetInformationJobObject(JobObjectAssociateCompletionPortInformation).
	associateCompletionPort(job, port handle, key uintptr) error
	// jobAccounting is
	// QueryInformationJobObject(JobObjectBasicAccountingInformation).
	jobAccounting(job handle) (accounting, error)
	// jobIO is the I/O counters of
	// QueryInformationJobObject(JobObjectBasicAndIoAccountingInformation).
	jobIO(job handle) (ioCounters, error)
	// peakJobMemory is JobObjectExtendedLimitInformation's PeakJobMemoryUsed.
	peakJobMemory(job handle) (uint64, error)
	// jobMemory is JobObjectMemoryUsageInformation's JobMemory: the job's
	// committed memory now (the class hcsshim's jobcontainers read for a
	// HostProcess container's statistics, jobobject QueryMemoryStats).
	jobMemory(job handle) (uint64, error)
	// jobProcessIDs is QueryInformationJobObject(JobObjectBasicProcessIdList).
	jobProcessIDs(job handle) ([]uint32, error)
	terminateJobObject(job handle, code uint32) error
	assignProcessToJobObject(job, process handle) error

	// createCompletionPort is CreateIoCompletionPort(INVALID_HANDLE_VALUE).
	createCompletionPort() (handle, error)
	// jobMessage is GetQueuedCompletionStatus: the message (a
	// JOB_OBJECT_MSG_* number) and its key; errTimeout after timeoutMs.
	jobMessage(port handle, timeoutMs uint32) (msg uint32, key uintptr, err error)
	// postMessage is PostQueuedCompletionStatus(port, 0, key, NULL).
	postMessage(port handle, key uintptr) error

	// createProcess is CreateProcessAsUserW, suspended: the process is
	// resumed once it is in the job.
	createProcess(p startParams) (started, error)
	resumeThread(thread handle) error
	// ownJob is IsProcessInJob(GetCurrentProcess(), NULL) and, when the
	// shim is in a job, the LimitFlags of
	// QueryInformationJobObject(NULL, JobObjectExtendedLimitInformation):
	// its job's.
	ownJob() (inJob bool, limitFlags uint32, err error)
	// waitProcess is WaitForMultipleObjects(process, cancel): whether the
	// process exited (false: cancel was set first).
	waitProcess(process, cancel handle) (bool, error)
	// exitCode is GetExitCodeProcess.
	exitCode(process handle) (uint32, error)
	terminateProcess(process handle, code uint32) error
	// openProcess is OpenProcess with the rights a console event needs.
	openProcess(pid uint32) (handle, error)
	// ctrlEvent runs kernel32!CtrlRoutine(event) on a new thread of the
	// process (CreateRemoteThread): the console control event as Windows
	// delivers it to a process's handlers, whatever console it has.
	ctrlEvent(process handle, event uint32) error
	// createEvent is CreateEventW (manual reset, not set); setEvent is
	// SetEvent.
	createEvent() (handle, error)
	setEvent(event handle) error
	// createPseudoConsole is CreatePseudoConsole over the console's input
	// (read end) and output (write end) pipes; resizePseudoConsole and
	// closePseudoConsole are ResizePseudoConsole and ClosePseudoConsole.
	createPseudoConsole(width, height uint16, in, out *os.File) (handle, error)
	resizePseudoConsole(console handle, width, height uint16) error
	closePseudoConsole(console handle)
	// systemProcesses is NtQuerySystemInformation(SystemProcessInformation).
	systemProcesses() ([]processRecord, error)
	closeHandle(h handle) error

	// logonUser is LogonUserW (LOGON32_PROVIDER_DEFAULT); "" for no
	// domain or password.
	logonUser(user, domain, password string, logonType uint32) (handle, error)
	// processToken is OpenProcessToken(GetCurrentProcess(), TOKEN_ALL_ACCESS).
	processToken() (handle, error)
	// tokenUser is the token's user SID, S-1-5-....
	tokenUser(token handle) (string, error)
	// userEnvironment is CreateEnvironmentBlock(token, no inheritance),
	// NAME=VALUE each.
	userEnvironment(token handle) ([]string, error)
	// localGroupExists is NetLocalGroupGetInfo(level 0): false for
	// NERR_GroupNotFound and ERROR_NO_SUCH_ALIAS.
	localGroupExists(name string) (bool, error)
	// addUser is NetUserAdd(level 1): a normal account whose password
	// does not expire.
	addUser(name, password string) error
	// addGroupMember is NetLocalGroupAddMembers(level 3).
	addGroupMember(group, user string) error
	// deleteUser is NetUserDel; a missing user is errUserNotFound.
	deleteUser(name string) error

	// setVolumeMountPoint and deleteVolumeMountPoint are
	// SetVolumeMountPointW and DeleteVolumeMountPointW; the directory ends
	// with a backslash.
	setVolumeMountPoint(dir, volume string) error
	deleteVolumeMountPoint(dir string) error

	// activeProcessors is GetActiveProcessorCount(ALL_PROCESSOR_GROUPS).
	activeProcessors() uint32
	// windowsDirectory is GetWindowsDirectoryW, C:\Windows.
	windowsDirectory() (string, error)
}

// Errors the binding returns for answers the backend acts on.
var (
	errJobExists    = errors.New("a job object of this name exists")
	errTimeout      = errors.New("timed out")
	errUserNotFound = errors.New("the user does not exist")
)

// groupAffinity is GROUP_AFFINITY: processors of one processor group.
type groupAffinity struct {
	Mask  uint64
	Group uint16
}

// accounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION: times in 100 ns
// units, and the job's process counts.
type accounting struct {
	TotalUserTime, TotalKernelTime  uint64
	TotalProcesses, ActiveProcesses uint32
}

// ioCounters are a job's IO_COUNTERS.
type ioCounters struct {
	ReadOperations, WriteOperations uint64
	ReadBytes, WriteBytes           uint64
}

// startParams are CreateProcessAsUserW's: the program, the command line as
// the process gets it, its environment (NAME=VALUE each), directory and
// token, and either its standard handles (the child's ends of pipes; nil
// for none) or a pseudo console.
type startParams struct {
	token       handle
	application string
	commandLine string
	env         []string
	dir         string
	stdin       *os.File
	stdout      *os.File
	stderr      *os.File
	console     handle
}

// started is PROCESS_INFORMATION.
type started struct {
	process, thread handle
	pid             uint32
}

// processRecord is what SYSTEM_PROCESS_INFORMATION says of a process:
// times in 100 ns units, CreateTime since 1601 (a FILETIME).
type processRecord struct {
	PID                    uint32
	ImageName              string
	CreateTime             int64
	UserTime, KernelTime   int64
	PrivateBytes           uint64 // PrivatePageCount: committed memory
	WorkingSet, PrivateSet uint64 // WorkingSetSize, WorkingSetPrivateSize
}

// Job object messages (JOB_OBJECT_MSG_*).
const (
	msgActiveProcessZero = 4
	msgNewProcess        = 6
	msgExitProcess       = 7
	msgAbnormalExit      = 8
)

// Job limit flags (JOB_OBJECT_LIMIT_*) and CPU rate flags
// (JOB_OBJECT_CPU_RATE_CONTROL_*).
const (
	limitJobMemory       = 0x00000200
	limitBreakawayOK     = 0x00000800
	limitSilentBreakaway = 0x00001000
	limitKillOnClose     = 0x00002000

	cpuRateEnable      = 0x1
	cpuRateWeightBased = 0x2
	cpuRateHardCap     = 0x4
)

// Console control events (CTRL_*_EVENT) and logon types (LOGON32_LOGON_*).
const (
	ctrlCEvent        = 0
	ctrlBreakEvent    = 1
	ctrlCloseEvent    = 2
	ctrlLogoffEvent   = 5
	ctrlShutdownEvent = 6

	logonInteractive = 2
	logonService     = 5
)
