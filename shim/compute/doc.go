// Package compute is the shim's one seam to compute systems: the
// process-isolated Windows containers HCS calls silos. A Backend creates and
// opens Systems, a System runs Processes. There are two backends, HCS on
// Windows (through hcsshim's public root package, HCS schema v1) and a
// Wine-based emulation on Linux; the task service sees only this package.
//
// The package also holds the pure translation of a container's OCI runtime
// spec into backend-neutral Settings and ProcessSettings (FromSpec,
// ProcessFromSpec, ResourcesFromSpec) and the Windows command-line rules
// (EscapeArg, JoinArgs, SplitCommandLine). Anything winproc cannot honour is
// refused with an error wrapping errdefs.ErrInvalidArgument that names the
// spec field and what to do, rather than dropped. Operations a backend
// cannot perform fail with ErrNotSupported (errdefs.ErrNotImplemented).
//
// # OCI spec to Settings
//
//	rootfs: one windows-layer mount         Layers.Scratch = Source, Layers.Parents = parentLayerPaths (nearest first)
//	windows.layerFolders [p1..pn, scratch]  Layers.Scratch = last, Layers.Parents = the rest, in order
//	                                        (exactly one of the two; "rw" only; at least one parent; paths
//	                                        absolute, non-empty, distinct ignoring case)
//	mounts[] host dir -> C:\dir             MappedDirectories{HostPath, ContainerPath normalised, ReadOnly = "ro"}
//	mounts[] \\.\pipe\A -> \\.\pipe\B       MappedPipes{HostPath \\.\pipe\A, ContainerPipeName B}
//	                                        (type "" or "bind"; options ro, rw and the no-ops bind, rbind,
//	                                        private, rprivate; destinations distinct)
//	windows.resources.cpu.count             Resources.CPUCount, capped at hostCPUs (CPUCountCapped, RequestedCPUCount)
//	windows.resources.cpu.maximum           Resources.CPUMaximum, 1..10000
//	windows.resources.cpu.shares            Resources.CPUWeight, 1..10000
//	                                        (at most one of the three; 0 means unset, as in HCS)
//	windows.resources.cpu.affinity          Resources.CPUAffinity (non-zero masks, one per group)
//	windows.resources.memory.limit          Resources.MemoryLimitBytes (MemoryLimitMB rounds up)
//	windows.resources.storage.iops / bps    Resources.StorageIOPSMaximum / StorageBandwidthMaximum
//	windows.resources.storage.sandboxSize   Settings.SandboxSizeBytes
//	hostname                                Settings.HostName
//	windows.network.networkNamespace        Network.Namespace
//	windows.network.endpointList            Network.Endpoints
//	windows.network.networkSharedContainerName  Network.SharedContainerName
//	windows.network.DNSSearchList           Network.DNSSearchList
//	windows.network.allowUnqualifiedDNSQuery    Network.AllowUnqualifiedDNSQuery
//	annotation io.kubernetes.cri.sandbox-id     Network.PodSandbox
//	annotation io.kubernetes.cri.container-type = sandbox  Network.IsPodSandbox
//	windows.credentialSpec (string|object)  Settings.CredentialSpec, the JSON object as text
//	windows.devices[] class / vpci-class-guid   Settings.AssignedDevices (interface class GUIDs)
//	windows.ignoreFlushesDuringBoot         Settings.IgnoreFlushesDuringBoot
//	process.commandLine                     ProcessSettings.CommandLine, as is
//	process.args (without commandLine)      ProcessSettings.CommandLine = JoinArgs(args)
//	process.cwd                             ProcessSettings.WorkingDirectory, default C:\
//	process.user.username                   ProcessSettings.User (kubelet's runAsUserName)
//	process.env ["NAME=VALUE"]              ProcessSettings.Env, in order
//	process.terminal, consoleSize           ProcessSettings.Terminal, ConsoleWidth, ConsoleHeight
//
// Refused: a spec without a windows section, windows.hyperv (use runhcs),
// windows.servicing, windows devices of other id types, linux, solaris, vm,
// zos, freebsd, domainname, hooks, root.readonly, a non-empty root.path
// (winproc mounts the layers itself), disk and Linux mount types, uvm:// and
// sandbox:// sources, ID-mapped mounts, mount options beyond those above,
// and the POSIX process fields (capabilities, rlimits, noNewPrivileges,
// apparmorProfile, oomScoreAdj, scheduler, selinuxLabel, ioPriority,
// execCPUAffinity, user.umask, non-zero user.uid, user.gid or
// user.additionalGids; containerd itself puts gid 0 in additionalGids).
// Other annotations are not read: hcsshim's io.microsoft.* overrides are
// runhcs features.
//
// Docker's ArgsEscaped convention needs nothing here: the runtime spec's
// Process has no such field, and containerd turns an ArgsEscaped image's
// command into process.commandLine, which is used as it is. commandLine
// wins over args, as the runtime spec says.
//
// # Settings to HCS schema v1
//
// The HCS backend builds an hcsshim.ContainerConfig (SystemType
// "Container", Name = id, Owner = the shim, HvPartition false) and an
// hcsshim.ProcessConfig:
//
//	Layers.Scratch              LayerFolderPath; VolumePath = the scratch volume after
//	                            hcsshim.ActivateLayer + PrepareLayer (GetLayerMountPath)
//	Layers.Parents              Layers []hcsshim.Layer{ID: NameToGuid(base name), Path}
//	MappedDirectories           MappedDirectories []hcsshim.MappedDir{HostPath, ContainerPath, ReadOnly}
//	MappedPipes                 MappedPipes []hcsshim.MappedPipe{HostPath, ContainerPipeName}
//	Resources.CPUCount          ProcessorCount (uint32)
//	Resources.CPUMaximum        ProcessorMaximum (int64)
//	Resources.CPUWeight         ProcessorWeight (uint64)
//	Resources.MemoryLimitMB()   MemoryMaximumInMB (int64)
//	Resources.StorageIOPSMaximum / StorageBandwidthMaximum
//	                            StorageIOPSMaximum / StorageBandwidthMaximum
//	SandboxSizeBytes            StorageSandboxSize
//	HostName                    HostName
//	Network.Endpoints           EndpointList
//	Network.SharedContainerName NetworkSharedContainerName; for a pod's
//	                            app container, Network.PodSandbox (below)
//	Network.DNSSearchList       DNSSearchList, joined with ","
//	Network.AllowUnqualifiedDNSQuery  AllowUnqualifiedDNSQuery
//	CredentialSpec              Credentials
//	AssignedDevices             AssignedDevices []hcsshim.AssignedDevice{InterfaceClassGUID}
//	IgnoreFlushesDuringBoot     IgnoreFlushesDuringBoot
//	ProcessSettings.CommandLine / WorkingDirectory / User
//	                            ProcessConfig.CommandLine / WorkingDirectory / User
//	ProcessSettings.Env         ProcessConfig.Environment (a map: later entries win)
//	ProcessSettings.Terminal    ProcessConfig.EmulateConsole
//	ConsoleHeight, ConsoleWidth ProcessConfig.ConsoleSize [2]uint{height, width}
//	Stdin / Stdout / Stderr     CreateStdInPipe / CreateStdOutPipe / CreateStdErrPipe (non-nil)
//
// Statistics and ProcessList come from the public Container's Statistics
// (times in 100 ns units, multiplied into Stats' nanoseconds) and
// ProcessList. Open is hcsshim.OpenContainer.
//
// # What public schema v1 cannot express
//
//   - Network.Namespace: ContainerConfig has no namespace field. The
//     backend resolves the namespace to its endpoints with the public hcn
//     package (hcn.GetNamespaceEndpointIds) and passes them as
//     EndpointList, or hot-adds them with Container.Modify (a Network Add
//     request, the only kind v1 Modify takes). An endpoint attaches to one
//     compartment, so within a pod only the sandbox container
//     (Network.IsPodSandbox) gets the namespace's endpoints; the pod's
//     other containers share its network stack through
//     NetworkSharedContainerName = Network.PodSandbox, as schema-v1
//     runtimes did (runhcs puts every container in the namespace through
//     schema v2's Networking.Namespace instead).
//   - Resources.CPUAffinity: no field. runhcs pins the silo's job object
//     out of band, through internal packages.
//   - System.Modify of CPU or memory limits: the public Container.Modify
//     takes network requests only; runhcs uses the internal schema-v2
//     resource paths. The HCS backend returns ErrNotSupported.
//   - Process.Signal: the public Process has Kill only, no console control
//     events (runhcs signals through the internal v2 process API). The HCS
//     backend returns ErrNotSupported; the shim falls back to Kill.
//   - Devices by location path or instance id: v1 AssignedDevice holds an
//     interface class GUID only.
//   - The environment's order and duplicates: ProcessConfig.Environment is
//     a map.
//   - hcsshim's registry changes (WaitToKillServiceTimeout, WER process
//     dumps) and container credential guard state: schema v2 only.
package compute
