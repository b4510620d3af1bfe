// Package dllguard turns the panic golang.org/x/sys/windows raises for a
// DLL or procedure the host lacks (LazyProc.Addr, as hcsshim's generated
// system calls use it) into an error of the call that needed it. A service
// that serves many calls must fail the one call, not end itself and every
// call behind it: winproc-snapshotter is every pull and every container
// start on the node.
package dllguard
