//go:build linux

package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/shim/emulation"
)

// Leaks lists what is left of container id's task: mounts and directories
// of its compute system, its bundle, its silo's cgroup, and live processes
// of its Wine silo.
func (n *Node) Leaks(id string) []string {
	sys := filepath.Join(n.EmulationRoot(), id)
	var leaks []string
	for _, m := range emulatednode.Mounts(sys) {
		leaks = append(leaks, "mount "+m)
	}
	dirs := []string{sys, n.Bundle(id)}
	if c := emulation.SiloCgroup(sys); c != "" {
		dirs = append(dirs, c)
	}
	for _, d := range dirs {
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
