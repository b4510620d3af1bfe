//go:build linux

package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	for _, pid := range processes(func(_ int, cmdline, environ []byte) bool {
		return bytes.Contains(environ, []byte("WINEPREFIX="+filepath.Join(sys, "prefix")))
	}) {
		leaks = append(leaks, "process "+strconv.Itoa(pid)+" "+comm(pid))
	}
	return leaks
}

// Shims lists the live shim processes serving this node.
func (n *Node) Shims() []int {
	return processes(func(_ int, cmdline, _ []byte) bool {
		return bytes.Contains(cmdline, []byte("containerd-shim-winproc-v2")) && bytes.Contains(cmdline, []byte(n.Address))
	})
}

// killLeftovers ends the shims and Wine processes of this node that a
// failed test left running.
func (n *Node) killLeftovers() {
	for _, pid := range n.Shims() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range processes(func(_ int, _, environ []byte) bool {
		return bytes.Contains(environ, []byte("WINEPREFIX="+n.Dir+"/"))
	}) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processes lists live (not zombie) processes matching keep. Zombies are
// skipped: PID 1 of these machines does not reap orphans.
func processes(keep func(pid int, cmdline, environ []byte) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "Z" {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if keep(pid, cmdline, environ) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}
