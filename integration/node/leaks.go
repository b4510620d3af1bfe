//go:build linux

package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/winproc/winproc/internal/procscan"
)

// EmulationRoot is where the shim's emulation backend keeps this node's
// compute systems (inside containerd's state directory).
func (n *Node) EmulationRoot() string {
	return filepath.Join(n.Dir, "state", "winproc-emulation", Namespace)
}

// Bundle is the task bundle containerd makes for container id.
func (n *Node) Bundle(id string) string {
	return filepath.Join(n.Dir, "state", "io.containerd.runtime.v2.task", Namespace, id)
}

// SandboxBundle is the state directory containerd's shim sandbox
// controller makes for pod id.
func (n *Node) SandboxBundle(id string) string {
	return filepath.Join(n.Dir, "state", "io.containerd.sandbox.controller.v1.shim", Namespace, id)
}

// Leaks lists what is left of container id's task: mounts and directories
// of its compute system, its bundle, and live processes of its Wine silo.
func (n *Node) Leaks(id string) []string {
	sys := filepath.Join(n.EmulationRoot(), id)
	var leaks []string
	for _, m := range Mounts(sys) {
		leaks = append(leaks, "mount "+m)
	}
	for _, d := range []string{sys, n.Bundle(id)} {
		if _, err := os.Stat(d); err == nil {
			leaks = append(leaks, "directory "+d)
		}
	}
	for _, pid := range procscan.Live(func(_ int, cmdline, environ []byte) bool {
		return bytes.Contains(environ, []byte("WINEPREFIX="+filepath.Join(sys, "prefix")))
	}) {
		leaks = append(leaks, "process "+strconv.Itoa(pid)+" "+procscan.Comm(pid))
	}
	return leaks
}

// Shims lists the live shim processes serving this node.
func (n *Node) Shims() []int {
	return procscan.Live(func(_ int, cmdline, _ []byte) bool {
		return bytes.Contains(cmdline, []byte("containerd-shim-winproc-v2")) && bytes.Contains(cmdline, []byte(n.Address))
	})
}

// killLeftovers ends the shims and Wine processes of this node that a
// failed test left running.
func (n *Node) killLeftovers() {
	for _, pid := range n.Shims() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range procscan.Live(func(_ int, _, environ []byte) bool {
		return bytes.Contains(environ, []byte("WINEPREFIX="+n.Dir+"/"))
	}) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}
