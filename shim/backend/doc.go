// Package backend opens the compute backend the shim is built for, the
// emulation on Linux and HCS on Windows, where it keeps its state, and
// tells the Windows build of the host it serves. The shim's services
// (package plugin) and its clean-up after a dead shim (package manager)
// both open it here.
package backend
