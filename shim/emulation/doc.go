// Package emulation is the Linux backend of compute.Backend: a Wine-based
// emulation of Windows process isolation, for tests and development. It
// runs the image's real Windows executables under Wine; it is NOT an
// isolation boundary and never pretends to be one: the processes are
// ordinary Linux processes of the shim's user, with the host's network,
// hostname and file system (Wine's Z: drive is the host's /).
//
// The package is empty on other systems (its code is Linux-only).
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
// ProcessSettings.User is ignored: everything runs as the shim's user.
//
// Stdio are pipes the backend copies; a process's Wait closes once it has
// exited and its output pipes reached EOF, or 2 s after its exit when a
// grandchild still holds them. Terminal processes get a pseudo terminal
// in raw mode (Wine runs its conhost.exe on it, which draws with VT escape
// sequences; the kernel must not cook, echo or flush what is typed);
// ResizeConsole resizes it. A console has no end of input of its own: at
// the end of Stdin, and at CloseStdin, a terminal process is sent Ctrl-Z
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
