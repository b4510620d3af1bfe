// Package compute is the shim's one seam to compute systems: the
// process-isolated Windows containers HCS calls silos. A Backend creates and
// opens Systems, a System runs Processes. There are two backends, HCS on
// Windows (HCS schema v2 through computecore.dll) and a Wine-based
// emulation on Linux; the task service sees only this package.
//
// The values are backend-neutral; specconv makes them from an OCI runtime
// spec. Operations a backend cannot perform fail with ErrNotSupported
// (errdefs.ErrNotImplemented).
//
// shim/hcs/MAPPING.md maps the values onto HCS's schema-v2 documents;
// shim/emulation's doc.go says what the emulation makes of them.
package compute
