// Package hcs is the Windows compute backend: compute.Backend over the
// Host Compute Service's documented API (computecore.dll) with schema-v2
// documents, as runhcs runs process-isolated containers, and hcsshim's
// public layer functions for the container's storage. MAPPING.md maps
// every Settings and ProcessSettings field onto the documents, lists where
// they differ from runhcs's and why, and gives the call order of creation
// and teardown.
//
// # Layout
//
// binding_windows.go is the only file that calls Windows for compute
// systems, and it only calls: one system call per binding method
// (binding.go). hcs_windows.go adds the layer functions and host facts.
// Every decision is platform-neutral and tested on Linux against a fake of
// the binding (fake_test.go):
//
//	schema2/    the schema-v2 documents
//	document.go Settings to the container document (proven against
//	            runhcs's own builder: document_oracle_test.go)
//	config.go   host checks, ProcessSettings to ProcessParameters
//	core.go     operations, cancellation, notifications, handles
//	errors.go   HRESULTs to errdefs classes
//	stats.go    Statistics and ProcessList to compute.Stats, ProcessInfo
//	backend.go  Create (layer mounting, gMSA, affinity, undo), Open
//	system.go   compute.System: Start, Shutdown, Terminate, Wait
//	update.go   Modify: a running container's limits, refusals named
//	terminate.go terminates carried on until the system stops
//	process.go  compute.Process: exit handling, Signal, Kill, console;
//	            stdio copied by shim/relay, its end kept by shim/procexit
//	record.go   the per-system record of what it holds, for Open
//
// The Windows tests (hcs_windows_test.go) need no HCS: they call the
// notification callback as HCS does, read HCS's errors, and run the binding
// against the node's stand-in HCS (integration/winenode/testdata/standins:
// computecore.dll and its service, real processes in a job object, faults
// set by faults.h lines; built and run under Wine in a prefix of their own
// by binding_wine_test.go, faults_windows_test.go). The whole package's
// tests also run as a Windows binary under Wine. The fake binding's fault
// plan (faultplan_test.go) takes the same fault lines, with the same kinds
// (faultline_test.go).
//
// # Lifecycle
//
// A System owns one goroutine blocked in its handle's Wait, which the
// SystemExited notification (or Close) ends; it closes Wait() when the
// system stopped. A Process owns one goroutine blocked in its handle's
// Wait; after the exit it copies the remaining output for at most
// Options.DrainTimeout, then closes Wait(). When a system stops under a
// running process, the process is terminated (as runhcs does) and, if HCS
// still reports no exit, given up after a while.
//
// The shim closes a system after it stopped; Close then releases what it
// held: its Container Credential Guard instance and its scratch layer
// (UnprepareLayer, DeactivateLayer). A system closed while the backend
// still terminates it is the backend's until it stops; any other system
// closed while running keeps them, and Close says so. Under HCS's faults
// (docs/architecture.md, "Under faults") every call returns by its
// context's deadline, and each goroutine that outlives a call (an
// operation left to HCS, a background terminate, a killed process's exit
// check) has an end.
package hcs
