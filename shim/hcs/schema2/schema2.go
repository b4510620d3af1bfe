// Package schema2 holds the HCS schema-v2 documents winproc sends and
// reads: the compute system of a process-isolated container, its process
// parameters, modify requests and property queries. The types carry only
// the fields winproc uses, with HCS's JSON names and omitempty rules
// (hcsshim v0.15.0 internal/hcs/schema2 is the reference; its package is
// internal, so these are winproc's own), so that the JSON they marshal to
// is the document HCS receives. The package is a leaf: portable, with no
// behaviour.
package schema2

import (
	"encoding/json"
	"time"
)

// Version is a schema version.
type Version struct {
	Major int32 `json:"Major,omitempty"`
	Minor int32 `json:"Minor,omitempty"`
}

// V21 is schema 2.1, the version of every document winproc sends; HCS
// takes it from Windows build 17763 (1809, Windows Server 2019) on.
var V21 = Version{Major: 2, Minor: 1}

// ComputeSystem is the document HcsCreateComputeSystem takes.
type ComputeSystem struct {
	Owner                             string     `json:"Owner,omitempty"`
	SchemaVersion                     *Version   `json:"SchemaVersion,omitempty"`
	Container                         *Container `json:"Container,omitempty"`
	ShouldTerminateOnLastHandleClosed bool       `json:"ShouldTerminateOnLastHandleClosed,omitempty"`
}

// Container is a process-isolated container (a server silo).
type Container struct {
	GuestOs                  *GuestOs                       `json:"GuestOs,omitempty"`
	Storage                  *Storage                       `json:"Storage,omitempty"`
	MappedDirectories        []MappedDirectory              `json:"MappedDirectories,omitempty"`
	MappedPipes              []MappedPipe                   `json:"MappedPipes,omitempty"`
	Memory                   *Memory                        `json:"Memory,omitempty"`
	Processor                *Processor                     `json:"Processor,omitempty"`
	Networking               *Networking                    `json:"Networking,omitempty"`
	ContainerCredentialGuard *ContainerCredentialGuardState `json:"ContainerCredentialGuard,omitempty"`
	RegistryChanges          *RegistryChanges               `json:"RegistryChanges,omitempty"`
	AssignedDevices          []Device                       `json:"AssignedDevices,omitempty"`
}

// GuestOs is the container's operating system settings.
type GuestOs struct {
	HostName string `json:"HostName,omitempty"`
}

// Storage is the container's file system: its image layers and the mounted
// scratch volume.
type Storage struct {
	// Layers are the read-only image layers, nearest parent first.
	Layers []Layer `json:"Layers,omitempty"`
	// Path is the scratch layer's volume, \\?\Volume{GUID}\.
	Path string      `json:"Path,omitempty"`
	QoS  *StorageQoS `json:"QoS,omitempty"`
}

// Layer is an image layer: its id (derived from its directory name) and
// directory.
type Layer struct {
	Id   string `json:"Id,omitempty"` //nolint:revive // HCS's name.
	Path string `json:"Path,omitempty"`
}

// StorageQoS limits the system drive's I/O.
type StorageQoS struct {
	IopsMaximum      int32 `json:"IopsMaximum,omitempty"`
	BandwidthMaximum int32 `json:"BandwidthMaximum,omitempty"`
}

// MappedDirectory is a host directory (or file) visible in the container.
type MappedDirectory struct {
	HostPath      string `json:"HostPath,omitempty"`
	ContainerPath string `json:"ContainerPath,omitempty"`
	ReadOnly      bool   `json:"ReadOnly,omitempty"`
}

// MappedPipe is a host named pipe visible in the container.
type MappedPipe struct {
	ContainerPipeName string `json:"ContainerPipeName,omitempty"`
	HostPath          string `json:"HostPath,omitempty"`
}

// Memory is the container's commit limit.
type Memory struct {
	SizeInMB uint64 `json:"SizeInMB,omitempty"`
}

// Processor is the container's processor limits; at most one is set.
type Processor struct {
	Count   int32 `json:"Count,omitempty"`
	Maximum int32 `json:"Maximum,omitempty"`
	Weight  int32 `json:"Weight,omitempty"`
}

// Networking is the container's network.
type Networking struct {
	AllowUnqualifiedDnsQuery   bool   `json:"AllowUnqualifiedDnsQuery,omitempty"` //nolint:revive // HCS's name.
	DnsSearchList              string `json:"DnsSearchList,omitempty"`            //nolint:revive // HCS's name.
	NetworkSharedContainerName string `json:"NetworkSharedContainerName,omitempty"`
	// Namespace is the HNS namespace GUID the container joins.
	Namespace string `json:"Namespace,omitempty"`
}

// ContainerCredentialGuardState is a Container Credential Guard instance,
// which gives the container its gMSA identity.
type ContainerCredentialGuardState struct {
	Cookie         string `json:"Cookie,omitempty"`
	RpcEndpoint    string `json:"RpcEndpoint,omitempty"` //nolint:revive // HCS's name.
	Transport      string `json:"Transport,omitempty"`
	CredentialSpec string `json:"CredentialSpec,omitempty"`
}

// RegistryChanges are registry values set in the container before it
// starts.
type RegistryChanges struct {
	AddValues []RegistryValue `json:"AddValues,omitempty"`
}

// Registry hives and value types as HCS names them.
const (
	HiveSystem   = "System"
	HiveSoftware = "Software"
	TypeString   = "String"
	TypeDWord    = "DWord"
)

// RegistryKey is a key under a hive.
type RegistryKey struct {
	Hive string `json:"Hive,omitempty"`
	Name string `json:"Name,omitempty"`
}

// RegistryValue is one value to set.
type RegistryValue struct {
	Key         *RegistryKey `json:"Key,omitempty"`
	Name        string       `json:"Name,omitempty"`
	Type        string       `json:"Type,omitempty"`
	StringValue string       `json:"StringValue,omitempty"`
	DWordValue  int32        `json:"DWordValue,omitempty"`
}

// DeviceInstance is the Device Type of a device named by location path.
const DeviceInstance = "DeviceInstance"

// Device is a host device made visible in the container: every device of
// an interface class, or one device by its location path.
type Device struct {
	Type               string `json:"Type,omitempty"`
	InterfaceClassGuid string `json:"InterfaceClassGuid,omitempty"` //nolint:revive // HCS's name.
	LocationPath       string `json:"LocationPath,omitempty"`
}

// ProcessParameters is the document HcsCreateProcess takes.
type ProcessParameters struct {
	CommandLine      string            `json:"CommandLine,omitempty"`
	User             string            `json:"User,omitempty"`
	WorkingDirectory string            `json:"WorkingDirectory,omitempty"`
	Environment      map[string]string `json:"Environment,omitempty"`
	EmulateConsole   bool              `json:"EmulateConsole,omitempty"`
	CreateStdInPipe  bool              `json:"CreateStdInPipe,omitempty"`
	CreateStdOutPipe bool              `json:"CreateStdOutPipe,omitempty"`
	CreateStdErrPipe bool              `json:"CreateStdErrPipe,omitempty"`
	// ConsoleSize is {height, width}.
	ConsoleSize []int32 `json:"ConsoleSize,omitempty"`
}

// SignalProcessOptions is the document HcsSignalProcess takes: a console
// control event (CtrlC, CtrlBreak, CtrlClose, CtrlLogOff, CtrlShutdown).
type SignalProcessOptions struct {
	Signal string `json:"Signal,omitempty"`
}

// ProcessModifyRequest is the document HcsModifyProcess takes: a console
// resize or the closing of a standard handle.
type ProcessModifyRequest struct {
	Operation   string       `json:"Operation,omitempty"`
	ConsoleSize *ConsoleSize `json:"ConsoleSize,omitempty"`
	CloseHandle *CloseHandle `json:"CloseHandle,omitempty"`
}

// ProcessModifyRequest operations.
const (
	OperationConsoleSize = "ConsoleSize"
	OperationCloseHandle = "CloseHandle"
)

// ConsoleSize is a console's size in characters.
type ConsoleSize struct {
	Height uint16 `json:"Height,omitempty"`
	Width  uint16 `json:"Width,omitempty"`
}

// CloseHandle names a standard handle to close: "StdIn".
type CloseHandle struct {
	Handle string `json:"Handle,omitempty"`
}

// ModifySettingRequest is the document HcsModifyComputeSystem takes: a
// change of the resource at ResourcePath.
type ModifySettingRequest struct {
	ResourcePath string `json:"ResourcePath,omitempty"`
	RequestType  string `json:"RequestType,omitempty"`
	Settings     any    `json:"Settings,omitempty"`
}

// Resource paths of a running container's limits, and the request type
// that changes them: a Processor, or the memory limit in MiB as a number.
const (
	ResourceProcessorLimits = "Container/Processor"
	ResourceMemoryLimit     = "Container/Memory/SizeInMB"
	RequestUpdate           = "Update"
)

// PropertyQuery asks HcsGetComputeSystemProperties for property types.
type PropertyQuery struct {
	PropertyTypes []string `json:"PropertyTypes,omitempty"`
}

// Property types.
const (
	PropertyStatistics  = "Statistics"
	PropertyProcessList = "ProcessList"
)

// Properties is HcsGetComputeSystemProperties' answer.
type Properties struct {
	Id          string           `json:"Id,omitempty"` //nolint:revive // HCS's name.
	State       string           `json:"State,omitempty"`
	Stopped     bool             `json:"Stopped,omitempty"`
	Statistics  *Statistics      `json:"Statistics,omitempty"`
	ProcessList []ProcessDetails `json:"ProcessList,omitempty"`
}

// Statistics is a container's resource usage.
type Statistics struct {
	Timestamp          time.Time       `json:"Timestamp,omitempty"`
	ContainerStartTime time.Time       `json:"ContainerStartTime,omitempty"`
	Uptime100ns        uint64          `json:"Uptime100ns,omitempty"`
	Processor          *ProcessorStats `json:"Processor,omitempty"`
	Memory             *MemoryStats    `json:"Memory,omitempty"`
	Storage            *StorageStats   `json:"Storage,omitempty"`
}

// ProcessorStats is processor time in 100 ns units.
type ProcessorStats struct {
	TotalRuntime100ns  uint64 `json:"TotalRuntime100ns,omitempty"`
	RuntimeUser100ns   uint64 `json:"RuntimeUser100ns,omitempty"`
	RuntimeKernel100ns uint64 `json:"RuntimeKernel100ns,omitempty"`
}

// MemoryStats is memory use in bytes.
type MemoryStats struct {
	MemoryUsageCommitBytes            uint64 `json:"MemoryUsageCommitBytes,omitempty"`
	MemoryUsageCommitPeakBytes        uint64 `json:"MemoryUsageCommitPeakBytes,omitempty"`
	MemoryUsagePrivateWorkingSetBytes uint64 `json:"MemoryUsagePrivateWorkingSetBytes,omitempty"`
}

// StorageStats is the scratch volume's I/O.
type StorageStats struct {
	ReadCountNormalized  uint64 `json:"ReadCountNormalized,omitempty"`
	ReadSizeBytes        uint64 `json:"ReadSizeBytes,omitempty"`
	WriteCountNormalized uint64 `json:"WriteCountNormalized,omitempty"`
	WriteSizeBytes       uint64 `json:"WriteSizeBytes,omitempty"`
}

// ProcessDetails is one process of a container. HCS sends the counters as
// 64-bit numbers (hcsshim's int32 fields fail to decode a busy process).
type ProcessDetails struct {
	ProcessId                    uint32    `json:"ProcessId,omitempty"` //nolint:revive // HCS's name.
	ImageName                    string    `json:"ImageName,omitempty"`
	CreateTimestamp              time.Time `json:"CreateTimestamp,omitempty"`
	UserTime100ns                uint64    `json:"UserTime100ns,omitempty"`
	KernelTime100ns              uint64    `json:"KernelTime100ns,omitempty"`
	MemoryCommitBytes            uint64    `json:"MemoryCommitBytes,omitempty"`
	MemoryWorkingSetPrivateBytes uint64    `json:"MemoryWorkingSetPrivateBytes,omitempty"`
	MemoryWorkingSetSharedBytes  uint64    `json:"MemoryWorkingSetSharedBytes,omitempty"`
}

// SystemExitStatus is the EventData of a system's exit notification.
type SystemExitStatus struct {
	Status   int32  `json:"Status,omitempty"`
	ExitType string `json:"ExitType,omitempty"`
}

// ProcessStatus is the EventData of a process's exit notification.
type ProcessStatus struct {
	ProcessId      uint32 `json:"ProcessId,omitempty"` //nolint:revive // HCS's name.
	Exited         bool   `json:"Exited,omitempty"`
	ExitCode       uint32 `json:"ExitCode,omitempty"`
	LastWaitResult int32  `json:"LastWaitResult,omitempty"`
}

// ModificationRequest is the document HcsModifyServiceSettings takes.
type ModificationRequest struct {
	PropertyType string `json:"PropertyType,omitempty"`
	Settings     any    `json:"Settings,omitempty"`
}

// PropertyContainerCredentialGuard is the service property of Container
// Credential Guard instances.
const PropertyContainerCredentialGuard = "ContainerCredentialGuard"

// Container Credential Guard operations.
const (
	AddInstance    = "AddInstance"
	RemoveInstance = "RemoveInstance"
)

// ContainerCredentialGuardOperationRequest adds or removes an instance.
type ContainerCredentialGuardOperationRequest struct {
	Operation        string `json:"Operation,omitempty"`
	OperationDetails any    `json:"OperationDetails,omitempty"`
}

// ContainerCredentialGuardAddInstanceRequest makes the instance of the
// container Id; a process-isolated container talks to it over LRPC.
type ContainerCredentialGuardAddInstanceRequest struct {
	Id             string `json:"Id,omitempty"` //nolint:revive // HCS's name.
	CredentialSpec string `json:"CredentialSpec,omitempty"`
	Transport      string `json:"Transport,omitempty"`
}

// ContainerCredentialGuardRemoveInstanceRequest removes the instance of
// the container Id.
type ContainerCredentialGuardRemoveInstanceRequest struct {
	Id string `json:"Id,omitempty"` //nolint:revive // HCS's name.
}

// ServiceProperties is HcsGetServiceProperties' answer: one document per
// property type asked for.
type ServiceProperties struct {
	Properties []json.RawMessage `json:"Properties,omitempty"`
}

// ContainerCredentialGuardSystemInfo lists the host's instances.
type ContainerCredentialGuardSystemInfo struct {
	Instances []ContainerCredentialGuardInstance `json:"Instances,omitempty"`
}

// ContainerCredentialGuardInstance is one container's instance.
type ContainerCredentialGuardInstance struct {
	Id              string                         `json:"Id,omitempty"` //nolint:revive // HCS's name.
	CredentialGuard *ContainerCredentialGuardState `json:"CredentialGuard,omitempty"`
}
