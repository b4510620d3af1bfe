// Package compute is the shim's one seam to compute systems: the
// process-isolated Windows containers HCS calls silos. A Backend creates and
// opens Systems, a System runs Processes. There are two backends, HCS on
// Windows (through hcsshim's public root package, HCS schema v1) and a
// Wine-based emulation on Linux; the task service sees only this package.
//
// The values are backend-neutral; specconv makes them from an OCI runtime
// spec. Operations a backend cannot perform fail with ErrNotSupported
// (errdefs.ErrNotImplemented).
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
