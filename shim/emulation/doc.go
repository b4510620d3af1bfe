// Package emulation is the Linux backend of compute.Backend: a Wine-based
// emulation of Windows process isolation, for tests and development. It
// runs the image's real Windows executables under Wine; it is NOT an
// isolation boundary and never pretends to be one: the processes are
// ordinary Linux processes of the shim's user, with the host's network,
// hostname and file system (Wine's Z: drive is the host's /).
//
// The package is empty on other systems (its code is Linux-only).
//
// A compute system is a silo (below) or, with Settings.HostProcess, a
// HostProcess container (see HostProcess containers).
//
// # A compute system
//
// Each system lives in Config.Root/<id>/ (DefaultRoot suggests /run, so
// that the directories go with their mounts at a reboot):
//
//	state.json     what Open and cleanup need (id, layers, mounts made,
//	               wineserver pid and socket directory, resources)
//	prefix/        the system's Wine prefix: an overlay mount with the
//	               template prefix (Config.TemplatePrefix) as its lower
//	               layer and prefix-upper/, prefix-work/ as upper and work
//	               directories, so it has its own registry, like a silo's
//	               hives
//	c/             drive C:: an overlay mount of the parent layers' Files/
//	               directories (nearest first) over the template prefix's
//	               drive_c (which stands in for the host OS files), with
//	               the scratch's Files/ as upper and its work/ as work
//	               directory (layermount.ScratchUpper, ScratchWork): the
//	               union view WCIFS gives on Windows. The prefix's
//	               dosdevices/c: link points at it (../../c).
//
// Mapped directories are bind mounts of the host directory (or file) onto
// the C: view (the mount point is created in the overlay, so it lands in
// the scratch); read-only ones are remounted read-only. Only C: paths
// exist; other drives are ErrNotSupported, as are mapped named pipes
// (Wine's named pipes do not reach the host's), assigned devices and gMSA
// credential specs. The hostname, HNS network settings and sandbox size
// are ignored with a warning; a Linux network namespace path is where the
// silo's processes start (netns_linux.go). Memory and CPU limits, at
// Create and through Modify, are enforced with the machine's cgroup v1
// controllers and RLIMIT_DATA (limits_linux.go), CPU affinity by binding
// every process of the silo (affinity_linux.go); storage QoS is recorded in
// state.json, not enforced.
//
// Overlay options are index=off, redirect_dir=off and metacopy=off, so the
// scratch stays a plain layer diff. mount(2) takes at most a page of
// options; a layer stack beyond that is mounted with the new mount API
// (fsopen and one lowerdir+ per layer, Linux 6.8 or later), and an older
// kernel fails with an error saying so. overlayfs takes at most 500 lower
// layers.
//
// Start runs the system's own `wineserver -f -p` (foreground, persistent)
// as a child of the shim, so the backend owns its lifetime, and waits for
// its socket. Every process of the system talks to that server: it is the
// silo's object namespace.
//
// # Processes
//
// CreateProcess runs `setarch -R wine <program> <args>`, with the command line split by
// wincmdline.SplitCommandLine and the program resolved on C: as CreateProcess
// resolves it (".exe" appended, then the working directory, system32,
// windows and PATH searched) and passed as a full path, so that the Linux
// process is the program's own and not start.exe. Its Linux working
// directory is the working directory's place below c/, which Wine maps
// back to C:\...; it must exist.
//
// setarch -R starts the process without address space randomization, and
// the processes it creates inherit that. The cause: Wine maps its shared
// user data (KUSER_SHARED_DATA) at the fixed address 0x7ffe0000, and this
// kernel places the heap of Wine's non-PIE loader (at 0x7d000000) anywhere
// in the 1 GiB above it. When the heap comes to lie there, Wine fails
// "to map the shared user data" (an ERR that WINEDEBUG=-all hides) and exits 1
// with no output a few milliseconds after the start. That happened to about
// 1 in 1,000 processes here: the silent first-process failures, and probes
// failing in the soak. A recorded backtrace put the exit(1) in ntdll's
// start-up, and the heaps of 200 processes started between 0x7d1b4000 and
// 0xbcc4f000. The tests that run Wine directly (internal/winetest,
// build/wine/go-exec.sh) use setarch -R too.
//
// The environment is the spec's, with Windows' rules (names ignore case, a
// later entry wins), on a base of the shim's PATH and HOME (Wine's own
// needs; Wine does not show them to Windows programs) and LANG=C.UTF-8
// (unless the spec sets LANG or LC_ALL), plus WINEPREFIX, WINEDEBUG=-all
// and WINEDLLOVERRIDES=mscoree,mshtml=;winemenubuilder.exe=d. Wine builds
// a program's PATH from the prefix's registry and ignores a Unix PATH, so a
// spec PATH is passed as WINEPATH, which Wine puts in front of the
// registry's (C:\windows\system32;C:\windows;...). PWD, HOME, TEMP and TMP,
// which Wine sets itself, and names starting with WINE or LD_ are dropped.
// A command line or an environment past Windows' limits (a line longer
// than CreateProcess takes, a value longer than 32,767 characters, a NUL)
// is refused by field (internal/validation) before Wine is asked, as
// Windows would refuse it: Wine would not (a NUL fails in Go's exec with a
// message of its own). In a silo ProcessSettings.User is ignored: everything runs as the shim's
// user.
//
// Stdio are pipes the backend copies; a process's Wait closes once it has
// exited and its output pipes reached EOF, or 2 s after its exit when a
// grandchild still holds them. Terminal processes get a pseudo terminal
// in raw mode (Wine runs its conhost.exe on it, which draws with VT escape
// sequences; the kernel must not cook, echo or flush what is typed);
// ResizeConsole resizes it. A console has no end of input of its own: at
// the end of Stdin a terminal process is sent Ctrl-Z
// and Enter, which a program reading its console line by line takes as EOF,
// and forwarding stops.
//
// Signals: every console event is SIGINT, which Wine delivers to the
// program's console control handlers as CTRL_C_EVENT (Wine cannot deliver
// CTRL_BREAK, CTRL_CLOSE, CTRL_LOGOFF or CTRL_SHUTDOWN). Kill is SIGKILL. Pids are
// Linux pids. Now and then (2 times in some 15,000 console events here, a Go
// program idle after signal.Notify) Wine takes the SIGINT, nothing stays
// pending, and the program's control handler never runs; a second SIGINT
// is delivered. The cause is not known.
//
// Exit codes and the exit library: every process runs with the preload
// library that `make wine` builds into the template
// (internal/winetemplate.ExitLibrary, from build/wine/wineexit.c). It has
// two jobs:
//   - It closes a race in Wine's exit. ExitProcess has the wineserver end
//     the other threads with SIGQUIT, and a thread already ending through
//     pthread_exit() could get it there: with glibc's loader lock held (the
//     first pthread_exit() of a process loads the unwinder), after which
//     exit() waits for the lock until the wineserver SIGKILLs the process
//     half a second after it closed its server connection
//     (server/process.c, start_sigkill_timer); or later, when the second
//     thread exit crashes. About 1 graceful exit in 80 of a Go program
//     after a console event ended so, its exit code lost. The library loads
//     the unwinder at start and blocks asynchronous signals in
//     pthread_exit(); 4,000 such exits in a row then kept their code.
//   - It records the exit status whole: the kernel keeps only the low 8
//     bits of it. At the entry of exit() or _exit() it writes its pid and
//     the status to a pipe it gets as descriptor 3, only in Wine's final
//     process image of the process started here. The status is what Wine
//     passes to exit(): the whole 32-bit Windows exit code (0xC000013A, not
//     58), except that Wine itself turns a code whose low byte is 0 into 1.
//
// The library removes itself and its variable from the environment, so the
// program does not see them and the processes it creates run without it.
// Without the library in the template, codes come from the kernel alone. A
// process that recorded nothing reports its kernel status, and 1 if a signal
// ended it; the backend logs which signal. Kill and Terminate end processes
// this way.
//
// # Stopping and cleaning up
//
// A silo's processes are its cgroup's, the wineserver included: the
// backend starts each process of a silo into the silo's cgroup v2 (clone3's
// CLONE_INTO_CGROUP), and what they start inherits it (cgroup_linux.go), as
// a Windows silo's processes are its job object's. The cgroup is recorded in
// state.json and removed with the system. Where the machine offers no
// writable cgroup v2 hierarchy, the silo's processes are found by scanning
// /proc for processes whose environment holds WINEPREFIX=Root/<id>/prefix
// (Wine passes it on to every process a program creates); a program that
// creates a process with an environment block lacking WINEPREFIX hides it
// from that scan (it still dies with its wineserver). Limits are not
// enforced either way (no controller is used).
//
// Shutdown sends SIGINT to every process but the wineserver and Wine's own
// system processes (services.exe, winedevice.exe, ...) and returns; once
// those processes have exited, the wineserver is stopped (SIGTERM, SIGKILL
// after 5 s), which ends Wine's processes, and Wait closes with a nil
// ExitError. Terminate SIGKILLs the wineserver and every process, repeatedly
// until none is left, then Wait closes. A system does not stop when its last
// process exits; if its wineserver dies unasked, Wait closes with an error.
//
// Close tears a stopped (or terminated: Close waits up to 10 s) system down:
// it unmounts everything below Root/<id>, deepest first, and removes the
// directory and the wineserver's socket directory. Nothing is deleted while
// anything below Root/<id> is still mounted. A running system is only
// released, and stays reachable with Open. A Create that fails undoes what
// it did.
//
// For the shim's delete subcommand, after a shim that died (its Backend
// needs no TemplatePrefix, which only Create uses):
//
//	backend, err := emulation.New(emulation.Config{Root: root})
//	sys, err := backend.Open(ctx, id) // running if any process of it is
//	sys.Terminate(ctx)                // ErrNotFound if it had stopped
//	<-sys.Wait()
//	sys.Close()                       // unmounts, removes Root/<id>
//
// or, needing neither state.json nor a System, Backend.Remove(ctx, id),
// which kills, unmounts and removes whatever is left of Root/<id>.
//
// A system's state.json names the shim that created it (pid and start
// time). After a crash that no delete follows (containerd killed too, or
// its state lost), FindOrphans lists the systems whose shim is gone and of
// which containerd has no task, and RemoveOrphan removes one with Remove,
// refusing one a running shim serves (orphans_linux.go; `winproc doctor
// -fix`).
//
// # HostProcess containers
//
// A HostProcess container has no silo: its processes run on the emulated
// host, as on Windows a job object's run on the host (hostprefix_linux.go,
// hostprocess_linux.go).
//
//   - The host prefix. The HostProcess containers of a Backend's root (the
//     node's, in one containerd namespace) all run in one Wine prefix,
//     Root/.hostprocess/prefix: an overlay of the template prefix, served by
//     one wineserver, booted as a silo is; the wineserver and Wine's
//     processes run in a cgroup of the host prefix's own. Its C: (its
//     drive_c) stands in for the host's system drive, shared by every
//     HostProcess container; Z: is the machine's /. Shims are separate
//     processes, one per pod: they make, join and leave the host prefix
//     under an flock on Root. The first HostProcess container's Create
//     makes it and starts its wineserver, a child of that shim in a process
//     group of its own, which outlives the shim; each container registers
//     in Root/.hostprocess/users/. The teardown of the last one kills the
//     host prefix's cgroup (the wineserver and Wine's processes), unmounts
//     it and removes Root/.hostprocess: nothing stays once the node runs no
//     HostProcess container. A registered container whose Root/<id> is gone
//     does not keep it; a host prefix whose wineserver died is made again by
//     the next Create (the containers that used it have stopped).
//   - Root/<id> holds only state.json. The rootfs, an overlay of the
//     parents' Files/ with the scratch's upper and work directories (no
//     template below: the host's files are the host prefix's C:), is
//     mounted at C:\hpc\<id> of the host prefix, the mount point. Mapped
//     directories are bound below the mount point (C:\data at
//     C:\hpc\<id>\data; read-only ones read-only), where runhcs places them
//     without the bind filter, and not at their container path: the host's
//     C: is every HostProcess container's, so a binding there would show in
//     all of them, and two containers mapping one path would collide.
//   - The network is the machine's network namespace; network settings and
//     the hostname are ignored with a warning.
//   - Each process starts in the container's cgroup v2 (membership,
//     Terminate's cgroup.kill, CPU time) and in its limit cgroups, with
//     RLIMIT_DATA and affinity, as a silo's: memory, CPU maximum, count and
//     weight, and affinity, at Create and through Modify. A machine without a
//     writable cgroup v2 hierarchy cannot run HostProcess containers
//     (ErrNotSupported): their processes share the host prefix, and only
//     their cgroups tell them apart.
//   - The rules of a HostProcess process are shim/hostprocess's, which the
//     HostProcess backend on Windows (shim/jobcontainer) follows too.
//     %CONTAINER_SANDBOX_MOUNT_POINT% and $env:CONTAINER_SANDBOX_MOUNT_POINT
//     in the command line, the working directory and environment values
//     are replaced with C:\hpc\<id>, as runhcs does. The program is found as
//     CreateProcess finds it, with the mount point searched first
//     (hostprocess.ResolveProgram: a bare name gets .exe and is looked for
//     in the mount point, the working directory, system32, system, the
//     Windows directory and PATH; a relative name with a directory below
//     the mount point, then the working directory, as written and then with
//     .exe; an unquoted path with spaces is found and quoted), in the host
//     prefix's C: without regard to case, and run with no shell in
//     between: the exit code is the program's own, all 32 bits of it (the
//     exit library), and a missing program fails CreateProcess with
//     ErrNotFound naming it and the directories searched. A relative
//     working directory, and "", is below the mount point; a full one is the
//     host's. Either must exist.
//   - The environment is hostprocess.Environment's: the spec's, then
//     CONTAINER_SANDBOX_MOUNT_POINT (C:\hpc\<id>\, runhcs's value) and a
//     PATH of the mount point in front of the spec's PATH and PowerShell's
//     and WMI's directories at its end (passed as WINEPATH, so in front of
//     the prefix's own PATH), on the base every process of the prefix gets:
//     Wine has no user profiles, only the prefix's one user, named after the
//     shim's Linux user, whose variables (USERNAME,
//     USERPROFILE=C:\users\<name>, APPDATA, ...) and the registry's make
//     that base, whatever account was asked for.
//   - Users: Wine has no accounts, and the emulation does not switch users:
//     every process runs as the shim's Linux user. ProcessSettings.User must
//     be an account hostprocess.ParseAccount takes: NT AUTHORITY\SYSTEM, NT
//     AUTHORITY\LOCAL SERVICE, NT AUTHORITY\NETWORK SERVICE, or a user or
//     group name (with or without a domain); another NT AUTHORITY account,
//     or none without InheritUser, is ErrInvalidArgument. The accounts asked
//     for are recorded in state.json (hostProcess.users), the well-known
//     ones in Windows' spelling. InheritUser takes any.
//   - Console events and Kill are a silo process's. The container stops
//     when its last process has exited after one ran (as a job object's
//     last process ends it), at Shutdown (SIGINT to its processes; Wine's
//     conhost.exe, if left, is killed) or Terminate (cgroup.kill), or when
//     the host prefix's wineserver it joined exits (its processes are
//     killed, and ExitError says so). It is watched through an inotify watch
//     of its cgroup's cgroup.events and a pidfd of that wineserver: a
//     running container costs no polling. Nothing of it reaches the
//     wineserver, Wine's processes or another container.
//   - Stats and ProcessList read the container's cgroup, as a silo's.
//   - Close of a stopped container, Remove, or Open, Terminate and Close for
//     a dead shim's delete, remove its cgroups once their processes are
//     gone, unmount its mapped directories and rootfs, remove the mount
//     point and Root/<id>, and leave the host prefix, which goes with its
//     last user.
//
// # Orphans
//
// Wine double-forks the processes programs create, and its system processes
// outlive their parents; PID 1 on the machines this runs on does not reap
// orphans. New makes the shim a child subreaper, and one reaper per process
// (shared by its Backends) reaps the silos' orphans by pid, never with
// wait4(-1), so no exit status is stolen from os/exec (reaper_linux.go).
// With cgroups it runs on SIGCHLD alone: an idle shim does no work.
//
// # Statistics
//
// Stats and ProcessList read counters, never a process's mappings (a Wine
// process has thousands, and containerd's CRI asks for statistics every
// second): CPU time from the silo's cgroup (without one, that of the running
// processes plus that of the processes this process reaped); CommitBytes
// approximated by the private writable mappings (VmData and VmStk) (Wine reserves address space inaccessible
// and commits it by making it writable, so VmSize, gigabytes for any Wine
// process, would be meaningless); CommitPeakBytes the highest sample so far;
// PrivateWorkingSetBytes the resident private pages; storage from
// /proc/<pid>/io of running processes: the bytes that reached storage (any
// file system, not only the scratch), and as counts one per 64 KiB started,
// HCS's normalisation applied to the bytes (Linux has no per-process count
// of storage operations). ProcessList leaves out the wineserver and names a
// process by the exe of its command line.
package emulation
