// Package specconv translates a container's OCI runtime spec into the
// backend-neutral settings of its compute system and init process
// (compute.Settings, compute.ProcessSettings): FromSpec, ProcessFromSpec
// and ResourcesFromSpec. It is pure: no system is touched, so all of it is
// tested on Linux. Anything winproc cannot honour is refused with an error
// wrapping errdefs.ErrInvalidArgument that names the spec field and what
// to do, rather than dropped.
//
//	rootfs: one windows-layer mount         Layers.Scratch = Source, Layers.Parents = parentLayerPaths (nearest first)
//	windows.layerFolders [p1..pn, scratch]  Layers.Scratch = last, Layers.Parents = the rest, in order
//	                                        (exactly one of the two; "ro" (a view, which has a scratch too)
//	                                        runs like "rw"; at least one parent; paths absolute, non-empty,
//	                                        distinct ignoring case)
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
//	windows.credentialSpec (string|object)  Settings.CredentialSpec, the JSON object as text
//	windows.devices[] class / vpci-class-guid / vpci-location-path   Settings.AssignedDevices
//	windows.ignoreFlushesDuringBoot         nothing: a utility VM's disk setting, which runhcs drops for process isolation too
//	process.commandLine                     ProcessSettings.CommandLine, as is
//	process.args (without commandLine)      ProcessSettings.CommandLine = JoinArgs(args)
//	                                        (either at most 32,766 characters, CreateProcess's limit)
//	process.cwd                             ProcessSettings.WorkingDirectory, default C:\
//	process.user.username                   ProcessSettings.User (kubelet's runAsUserName; user or DOMAIN\user)
//	process.env ["NAME=VALUE"]              ProcessSettings.Env, in order (internal/validation:
//	                                        NAME=VALUE, no NUL, a value at most 32,767 characters)
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
// runhcs's annotations for process isolation (annotations.go) are honoured
// or refused, never ignored: the processor count, limit and weight, memory
// size and storage QoS override spec.windows.resources as in runhcs; the gMSA
// and unsafe-operations switches refuse a credential spec; the process dump
// ones (folder, type mini or full, count) set Settings.ProcessDumps,
// Windows Error Reporting's LocalDumps in the container. A value that is
// not a number or a boolean is refused, where runhcs logs and ignores it.
// Other annotations are not read.
//
// Docker's ArgsEscaped convention needs nothing here: the runtime spec's
// Process has no such field, and containerd turns an ArgsEscaped image's
// command into process.commandLine, which is used as it is. commandLine
// wins over args, as the runtime spec says. The path rules are winpath's,
// the command-line rules wincmdline's.
package specconv
