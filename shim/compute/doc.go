// Package compute is the shim's one seam to compute systems: the
// process-isolated Windows containers HCS calls silos. A Backend creates and
// opens Systems, a System runs Processes. There are three backends: HCS on
// Windows (shim/hcs, HCS schema v2 through computecore.dll), HostProcess
// containers as job objects on Windows (shim/jobcontainer), and a
// Wine-based emulation on Linux (shim/emulation); shim/backend picks one
// per container, and the task service sees only this package.
//
// The values are backend-neutral; specconv makes them from an OCI runtime
// spec. Operations a backend cannot perform fail with ErrNotSupported
// (errdefs.ErrNotImplemented).
//
// shim/hcs/MAPPING.md maps the values onto HCS's schema-v2 documents;
// shim/emulation's doc.go says what the emulation makes of them.
package compute
