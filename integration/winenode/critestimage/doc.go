// Package critestimage holds the programs of the Windows node's
// conformance image: the commands cri-tools' critest sends to a Windows
// container (pkg/validate/consts.go, pkg/framework/util.go of cri-tools
// v1.36.0), which Wine's own programs do not carry out (Wine's
// powershell.exe prints nothing and exits 0; Wine's ping has no -t). Build
// makes them.
//
//   - powershell: the script engine of `powershell -c|/c SCRIPT`, for the
//     scripts critest sends: echo, start-sleep, get-process | findstr, ls,
//     exit, a while($true) loop, $env:NAME, and external programs. Anything
//     else is refused with an error and exit status 1: nothing is answered
//     without being done. Built as powershell-engine.exe.
//   - host (host/host.c): the image's powershell.exe, a native program that
//     runs the engine beside it, as Windows' powershell.exe is native: a
//     Go program under Wine 8 that gets a console control event while its
//     runtime starts hangs (TestStopRightAfterStart).
//   - ping: `ping [-t] [-n N] HOST`, ICMP echo requests through
//     iphlpapi's IcmpSendEcho, as Windows' ping.exe sends them.
//
// All end on a console control event, as their Windows namesakes do, so a
// container stop does not wait for its whole timeout.
package critestimage
