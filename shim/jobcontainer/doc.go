// Package jobcontainer is the HostProcess backend: compute.Backend for
// HostProcess containers (compute.Settings.HostProcess), what Kubernetes'
// hostProcess pods run. A container is a job object of its own whose
// processes run on the host, as runhcs's internal/jobcontainers: the
// container's layers are mounted at <MountRoot>\<id> (C:\hpc\<id>, named
// by CONTAINER_SANDBOX_MOUNT_POINT), its mapped directories are bind
// filter bindings under it (links where the host has no bind filter), and
// every process is started from its command line with no
// shell in between, so that its exit code is its own. MAPPING.md maps the
// contract onto the Windows calls and says where it differs from runhcs.
//
// # Layout
//
// binding_windows.go, binding_process_windows.go and
// binding_users_windows.go are the only files that call Windows, and they
// only call: one function per binding method (binding.go). host_windows.go
// adds hcsshim's layer functions (shim/scratch) and the file system. Every
// decision is platform-neutral and tested on Linux against a fake of the
// host (fake_test.go, fake_process_test.go, fake_users_test.go):
//
//	backend.go  Create (job, limits, rootfs, mapped directories, undo),
//	            Open, the record of what a container holds (shim/record)
//	bind.go     the rootfs and mapped directories as bind filter bindings
//	limits.go   Resources to the job's limits
//	system.go   compute.System: stop detection, Shutdown, Terminate,
//	            Stats, ProcessList, Modify, Close
//	start.go    CreateProcess: user, environment, directory, program
//	            (by shim/hostprocess's rules, which the emulation shares),
//	            pipes or pseudo console, suspended start in the job
//	orphans.go  what dead shims left; the check of a record before it is
//	            acted on: only names and paths the backend makes
//	users.go    ProcessSettings.User to a logon token
//	process.go  compute.Process: exit (its end kept by shim/procexit, as
//	            the HCS backend's), console events, kill, console size
//	stats.go    job accounting and process records to compute.Stats
//	errors.go   Windows errors to errdefs classes
//
// The Windows tests (jobcontainer_windows_test.go) run real processes (the
// test binary itself, as app.exe) in real job objects through the binding,
// with the rootfs a plain directory; binding_wine_test.go runs them under
// Wine from Linux, also with a stack move at every function entry. The
// Windows node under Wine (integration/winenode) runs the whole backend,
// rootfs and bindings included, under containerd.exe's CRI, with stand-ins
// of the layer functions and the bind filter.
//
// # Lifecycle
//
// A system owns one goroutine that reads its job's messages from a
// completion port and the job's process count after each; the system has
// stopped once the job has no process left after one ran, or after a stop
// was requested. A process owns one goroutine waiting for its exit (or
// for Close); it then copies the remaining output for at most
// Options.DrainTimeout and closes its handles. Close of a Terminal
// process that still runs ends it: its pseudo console is closed with the
// handles, and ClosePseudoConsole ends the processes attached to it. A
// Terminal process gets null standard handles, so that it opens its
// console's rather than inheriting the shim's. The job object is killed
// when its last handle closes: a shim that dies takes its containers'
// processes with it, and Open, for the shim's delete, then finds the job
// gone and releases what the record names.
package jobcontainer
