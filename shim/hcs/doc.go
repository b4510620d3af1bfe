// Package hcs is the Windows compute backend: compute.Backend over the Host
// Compute Service through hcsshim's public API only (the root hcsshim
// package's schema-v1 ContainerConfig, ProcessConfig, CreateContainer,
// OpenContainer, Container and Process, its layer functions, hcn for the
// HNS namespace, osversion). It runs process-isolated containers, as
// runhcs does, with runhcs's semantics where the public API allows them.
// MAPPING.md maps every Settings and ProcessSettings field onto schema v1,
// gives the call order of creation and teardown, and lists what the public
// API cannot do and what runhcs does instead.
//
// # Layout
//
// hcs_windows.go is the only file that calls hcsshim, and it only calls:
// it implements hcsAPI (backend.go) and copies between hcsshim's types and
// their mirrors. Every decision is platform-neutral and tested on Linux
// against a fake of hcsshim (fake_test.go):
//
//	config.go   Settings and ProcessSettings to the schema-v1 documents
//	            (mirrors of hcsshim's types with the same JSON), checks
//	errors.go   hcsshim errors to errdefs classes
//	stats.go    Statistics and ProcessList to compute.Stats, ProcessInfo
//	backend.go  Create (layer mounting and undo), Open, options
//	system.go   compute.System: Start, Shutdown, Terminate, Wait, Close
//	process.go  compute.Process: exit handling, Kill, Signal, console
//	relay.go    stdio copying between HCS's pipes and the caller's streams
//	record.go   the per-system record of the scratch layer, for Open
//
// The Windows tests (hcs_windows_test.go) need no HCS: they check that the
// hcsshim documents marshal exactly as the mirrors the Linux tests pin, and
// how hcsshim's own error values are read. The whole package's tests also
// run as a Windows binary under Wine.
//
// # Lifecycle
//
// A System owns one goroutine blocked in Container.Wait; it closes Wait()
// when the system stopped, or when Close closed the handle first. A Process
// owns one goroutine blocked in Process.Wait; after the exit it copies the
// remaining output for at most Options.DrainTimeout, then closes Wait().
// When a system stops under a running process, the process is killed (as
// runhcs does) and, if HCS still reports no exit, given up after a while.
//
// The shim closes a system after it stopped; Close then releases the
// scratch layer (UnprepareLayer, DeactivateLayer). A system closed while
// running keeps its scratch mounted and its record, and Close says so.
package hcs
