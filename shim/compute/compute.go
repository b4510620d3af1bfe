package compute

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"
)

// ErrNotSupported is returned, wrapped, by a backend for an operation it
// cannot perform (for example assigned devices in the emulation). It
// wraps errdefs.ErrNotImplemented, so errors.Is(err, ErrNotSupported) and
// errdefs.IsNotImplemented(err) both hold and containerd reports
// "not implemented" to the caller.
var ErrNotSupported = fmt.Errorf("not supported by this compute backend: %w", errdefs.ErrNotImplemented)

// Backend creates and opens compute systems (HCS "silos"). There are three
// (the package doc names them). A Backend is safe for concurrent use.
type Backend interface {
	// Create creates the compute system id from s, without starting it.
	// An existing system of that id is errdefs.ErrAlreadyExists.
	Create(ctx context.Context, id string, s *Settings) (System, error)
	// Open attaches to an existing system, for the shim's delete
	// subcommand cleaning up after a shim that died. A missing system is
	// errdefs.ErrNotFound.
	Open(ctx context.Context, id string) (System, error)
	// HostCPUs is the number of logical processors a system can be given;
	// FromSpec and ResourcesFromSpec cap processor counts to it.
	HostCPUs() int
}

// System is one compute system: a process-isolated container. Its methods
// are safe for concurrent use. Methods other than ID, Wait, ExitError and
// Close fail with errdefs.ErrNotFound once the system is gone.
type System interface {
	// ID is the id the system was created or opened with.
	ID() string
	// Start boots the created system. Its first process is started with
	// CreateProcess afterwards.
	Start(ctx context.Context) error
	// Shutdown asks the system to stop gracefully: its processes get
	// CTRL_SHUTDOWN_EVENT and a chance to exit. It does not wait; use Wait.
	Shutdown(ctx context.Context) error
	// Terminate stops the system at once, killing its processes. It does
	// not wait; use Wait.
	Terminate(ctx context.Context) error
	// Wait is closed when the system has stopped, however it stopped
	// (Shutdown, Terminate, its last process exiting, or the backend losing
	// it).
	Wait() <-chan struct{}
	// ExitError is why the system stopped, once Wait is closed: nil for a
	// requested Shutdown or Terminate, otherwise the backend's error.
	ExitError() error
	// Stats samples the system's resource usage.
	Stats(ctx context.Context) (*Stats, error)
	// ProcessList lists the processes running in the system.
	ProcessList(ctx context.Context) ([]ProcessInfo, error)
	// Modify changes the resource limits of a running system. Zero fields
	// of r are left as they are; r.CPUAffinity, when set, replaces the
	// affinity, and a CPU count, maximum or weight replaces the CPU limit
	// of whatever kind. A backend that cannot change a limit returns
	// ErrNotSupported, and one the host refuses for a running system
	// errdefs.ErrFailedPrecondition, naming it. The task service gives one
	// kind of limit per call and undoes the kinds applied when a later one
	// fails; a backend given several applies them in turn.
	Modify(ctx context.Context, r Resources) error
	// CreateProcess starts a process in the started system.
	CreateProcess(ctx context.Context, p *ProcessSettings) (Process, error)
	// Close releases the backend's handles on the system. It neither stops
	// the system nor waits for it.
	Close() error
}

// ShutdownGracer is a System whose graceful stop after its first process
// exited has a deadline of its own; others get the task's (30 s, HCS's).
// A HostProcess container's is runhcs's 5 s: what its processes left
// behind is on the host.
type ShutdownGracer interface {
	ShutdownGrace() time.Duration
}

// Drainer is a Backend that carries work on in the background after a call
// has returned (a teardown that could not finish within Close). Drain waits
// for that work to end, bounded by ctx; the shim drains before it exits.
type Drainer interface {
	Drain(ctx context.Context) error
}

// Signal is a Windows console control event. Windows processes have no
// POSIX signals; the shim maps containerd's signals onto these, and
// SIGKILL onto Process.Kill.
type Signal int

const (
	// CtrlC is CTRL_C_EVENT.
	CtrlC Signal = iota + 1
	// CtrlBreak is CTRL_BREAK_EVENT.
	CtrlBreak
	// CtrlShutdown is CTRL_SHUTDOWN_EVENT, what Windows sends at shutdown.
	CtrlShutdown
	// CtrlClose is CTRL_CLOSE_EVENT, what a console's closing sends.
	CtrlClose
	// CtrlLogOff is CTRL_LOGOFF_EVENT, what a user's logoff sends.
	CtrlLogOff
)

// String is the Windows name of the event.
func (s Signal) String() string {
	switch s {
	case CtrlC:
		return "CTRL_C_EVENT"
	case CtrlBreak:
		return "CTRL_BREAK_EVENT"
	case CtrlShutdown:
		return "CTRL_SHUTDOWN_EVENT"
	case CtrlClose:
		return "CTRL_CLOSE_EVENT"
	case CtrlLogOff:
		return "CTRL_LOGOFF_EVENT"
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Process is a process running in a System. Its methods are safe for
// concurrent use. Signal, Kill and ResizeConsole on a process that has
// exited fail with errdefs.ErrNotFound.
//
// The backend copies ProcessSettings.Stdin into the process, and the
// process's output into ProcessSettings.Stdout and Stderr. When Stdin
// reaches EOF (or fails) the backend closes the process's stdin.
type Process interface {
	// Pid is the process id inside the system.
	Pid() int
	// Signal delivers a console control event. It does not wait for the
	// process to exit.
	Signal(ctx context.Context, s Signal) error
	// Kill terminates the process. It does not wait for it to exit.
	Kill(ctx context.Context) error
	// Wait is closed once the process has exited and its output has been
	// copied to Stdout and Stderr (backends bound how long they keep
	// copying after the exit, for output pipes held open by a grandchild).
	Wait() <-chan struct{}
	// ExitCode is the exit code once Wait is closed; before that, or when
	// the backend lost the process, it is an error.
	ExitCode() (int, error)
	// ResizeConsole resizes the pseudo console of a Terminal process.
	ResizeConsole(ctx context.Context, width, height uint16) error
	// Close releases the backend's handles on the process and stops the
	// copying of its streams. It neither kills nor waits.
	Close() error
}

// Stats is a sample of a system's resource usage: what runhcs reports to
// containerd as WindowsContainerStatistics.
type Stats struct {
	// Timestamp is when the sample was taken.
	Timestamp time.Time
	// ContainerStartTime is when the system started.
	ContainerStartTime time.Time
	// Uptime is how long the system has run.
	Uptime time.Duration
	CPU    CPUStats
	Memory MemoryStats
	// Storage is the I/O of the system's scratch volume.
	Storage StorageStats
}

// CPUStats is processor time used by a system, in nanoseconds.
type CPUStats struct {
	TotalRuntimeNS  uint64
	RuntimeUserNS   uint64
	RuntimeKernelNS uint64
}

// MemoryStats is a system's memory use, in bytes.
type MemoryStats struct {
	CommitBytes            uint64
	CommitPeakBytes        uint64
	PrivateWorkingSetBytes uint64
}

// StorageStats is a system's storage I/O. The counts are normalised
// (HCS counts an I/O of more than 64 KB as several).
type StorageStats struct {
	ReadCount  uint64
	ReadBytes  uint64
	WriteCount uint64
	WriteBytes uint64
}

// ProcessInfo describes one process of a system, for the task's Pids.
type ProcessInfo struct {
	Pid             uint32
	ImageName       string
	CreateTimestamp time.Time
	UserTime        time.Duration
	KernelTime      time.Duration
	// MemoryCommitBytes is the process's committed memory.
	MemoryCommitBytes            uint64
	MemoryWorkingSetPrivateBytes uint64
	MemoryWorkingSetSharedBytes  uint64
}
