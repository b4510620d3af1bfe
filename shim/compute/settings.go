package compute

import "io"

// Settings is everything a backend needs to create a compute system. It is
// backend-neutral; shim/hcs/MAPPING.md maps it onto HCS's container
// document.
type Settings struct {
	// Layers is the container's filesystem.
	Layers Layers
	// MappedDirectories are host directories bind-mounted into the
	// container, in spec order.
	MappedDirectories []MappedDirectory
	// MappedPipes are host named pipes made visible in the container.
	MappedPipes []MappedPipe
	// Resources are the limits the system starts with.
	Resources Resources
	// SandboxSizeBytes is the minimum size of the system drive (the
	// scratch); 0 keeps the scratch's own size.
	SandboxSizeBytes uint64
	// HostName is the container's computer name; "" lets HCS choose.
	HostName string
	// Network is the container's networking.
	Network Network
	// CredentialSpec is the gMSA credential spec, a JSON object as text;
	// "" for none.
	CredentialSpec string
	// AssignedDevices are the host devices made visible in the container.
	AssignedDevices []Device
	// ProcessDumps, when set, has Windows Error Reporting write a dump of
	// every process of the container that crashes.
	ProcessDumps *ProcessDumps
	// HostProcess, when set, makes the system a HostProcess container.
	HostProcess *HostProcess
}

// HostProcess is a HostProcess container: what Kubernetes' hostProcess
// pods run (kube-proxy, CNI plugins, csi-proxy, node agents). Its
// processes run on the host, in a job object of the system's own rather
// than a silo: they see the host's network and file system, and the
// container's layers (Settings.Layers) at a mount point the backend
// chooses, which every process finds in SandboxMountPointEnv. The backend:
//
//   - makes the rootfs visible at the mount point, and each mapped
//     directory at its container path and under the mount point (runhcs's
//     fallback without the bind filter);
//   - starts each process from its command line as CreateProcess resolves
//     it, the mount point searched first, with no shell in between: the
//     exit code is the program's own and a missing program fails the
//     start, naming it;
//   - gives it the environment of its user's profile, then
//     SandboxMountPointEnv, the mount point at the front of PATH, and
//     ProcessSettings.Env over those;
//   - runs it as ProcessSettings.User: NT AUTHORITY\SYSTEM,
//     NT AUTHORITY\LOCAL SERVICE, NT AUTHORITY\NETWORK SERVICE, a local
//     user, or a local group (as a temporary user made in it), or with the
//     shim's own token when InheritUser is set;
//   - runs a relative working directory, and "", under the mount point;
//   - enforces Resources on the job object where the host allows;
//   - ends every process of the system when it stops, or when the shim
//     dies (the job object is killed when its last handle closes).
//
// Network, HostName, CredentialSpec, AssignedDevices, MappedPipes,
// ProcessDumps and storage limits do not apply (specconv refuses them).
type HostProcess struct {
	// InheritUser runs every process with the shim's own token
	// (annotation microsoft.com/hostprocess-inherit-user), whatever its
	// User.
	InheritUser bool
}

// SandboxMountPointEnv is the variable that tells a HostProcess container's
// processes where their container's rootfs is, as runhcs names it.
const SandboxMountPointEnv = "CONTAINER_SANDBOX_MOUNT_POINT"

// DeviceKind says how a Device names its devices.
type DeviceKind int

const (
	// DeviceClass is every device of an interface class, by class GUID.
	DeviceClass DeviceKind = iota + 1
	// DeviceLocationPath is one device, by its location path.
	DeviceLocationPath
)

// Device is a host device (or class of devices) assigned to a container.
type Device struct {
	Kind DeviceKind
	// ID is the interface class GUID or the location path.
	ID string
}

// DumpType is the kind of process dump Windows Error Reporting writes.
type DumpType int32

// The LocalDumps DumpType registry values.
const (
	DumpMini DumpType = 1
	DumpFull DumpType = 2
)

// ProcessDumps are Windows Error Reporting's LocalDumps settings inside a
// container.
type ProcessDumps struct {
	// Folder is where dumps are written, a path in the container. A
	// trailing {container_id} (or {CONTAINER_ID}) is replaced by the
	// compute system's id, for one folder per container on a share.
	Folder string
	Type   DumpType
	// Count is how many dumps the folder keeps, the oldest going first.
	Count int32
}

// Layers is a container's layer stack. specconv.FromSpec decodes and
// checks it (absolute, distinct paths, at least one parent); the backends
// check only what they need of the directories themselves.
type Layers struct {
	// Scratch is the container's own read-write layer directory.
	Scratch string
	// Parents are the read-only image layer directories, nearest parent
	// first; the last is the base layer. There is at least one.
	Parents []string
}

// MappedDirectory is a host directory visible in the container.
type MappedDirectory struct {
	// HostPath is the directory on the host, as the spec gave it.
	HostPath string
	// ContainerPath is where it appears, normalised: C:\data, or a drive
	// alone such as D:.
	ContainerPath string
	ReadOnly      bool
}

// MappedPipe is a host named pipe visible in the container.
type MappedPipe struct {
	// HostPath is the host pipe, \\.\pipe\NAME.
	HostPath string
	// ContainerPipeName is the pipe's name in the container, without the
	// \\.\pipe\ prefix.
	ContainerPipeName string
}

// Resources are a system's resource limits. A zero field is no limit (on
// creation) or no change (in System.Modify). At most one of CPUCount,
// CPUMaximum and CPUWeight is set.
type Resources struct {
	// CPUCount is the number of processors the container may use, at
	// most the host's.
	CPUCount uint32
	// CPUCountCapped is set when the spec asked for more processors than
	// the host has; RequestedCPUCount is what it asked for, and CPUCount
	// was lowered to the host's count. The caller logs a warning.
	CPUCountCapped    bool
	RequestedCPUCount uint64
	// CPUMaximum is the share of all host processor cycles the container
	// may use, in hundredths of a percent: 1..10000.
	CPUMaximum uint16
	// CPUWeight is the container's processor weight relative to other
	// containers, 1..10000 (the spec's shares).
	CPUWeight uint16
	// CPUAffinity pins the container's processors, one entry per
	// processor group.
	CPUAffinity []CPUGroupAffinity
	// MemoryLimitBytes is the container's commit limit.
	MemoryLimitBytes uint64
	// StorageIOPSMaximum and StorageBandwidthMaximum (bytes per second)
	// limit the system drive's I/O.
	StorageIOPSMaximum      uint64
	StorageBandwidthMaximum uint64
}

// MemoryLimitMB is MemoryLimitBytes in MiB, the unit HCS takes, rounded
// up so that a limit never becomes 0 (no limit) or less than asked.
func (r Resources) MemoryLimitMB() uint64 {
	const mib = 1 << 20
	mb := r.MemoryLimitBytes / mib
	if r.MemoryLimitBytes%mib != 0 {
		mb++
	}
	return mb
}

// CPUGroupAffinity is the processors of one processor group a container may
// run on.
type CPUGroupAffinity struct {
	// Mask has bit n set for processor n of the group.
	Mask uint64
	// Group is the processor group.
	Group uint16
}

// Network is a container's networking.
type Network struct {
	// Namespace is the HNS namespace GUID whose endpoints the container
	// joins (what containerd's CRI sets for a pod).
	Namespace string
	// Endpoints are HNS endpoint ids to attach.
	Endpoints []string
	// SharedContainerName is the container whose network stack this one
	// shares.
	SharedContainerName string
	// DNSSearchList are DNS suffixes for name resolution.
	DNSSearchList []string
	// AllowUnqualifiedDNSQuery allows resolving single-label names.
	AllowUnqualifiedDNSQuery bool
}

// ProcessSettings is a process to start in a system: the init process from
// the container's spec, or an exec'd one.
type ProcessSettings struct {
	// CommandLine is the Windows command line, program first.
	CommandLine string
	// WorkingDirectory is the process's directory in the container.
	WorkingDirectory string
	// User is the account to run as ("" for the image's default), such as
	// ContainerUser or NT AUTHORITY\SYSTEM.
	User string
	// Env is the environment, NAME=VALUE each, in spec order; a later
	// entry for a name replaces an earlier one (names are case-insensitive
	// on Windows).
	Env []string
	// Terminal runs the process on a pseudo console; its output then
	// arrives on Stdout only.
	Terminal bool
	// ConsoleWidth and ConsoleHeight are the console's initial size in
	// characters; 0 for the backend's default. Set only with Terminal.
	ConsoleWidth, ConsoleHeight uint16

	// Stdin, Stdout and Stderr are the process's streams; the shim sets
	// them, the translation leaves them nil. The backend copies Stdin into
	// the process (and closes the process's stdin at Stdin's EOF) and the
	// process's output into Stdout and Stderr. A nil stream is not
	// connected. Stderr is not used with Terminal.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}
