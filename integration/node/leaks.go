//go:build linux

package node

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/winproc/winproc/internal/emulatednode"
	"github.com/winproc/winproc/internal/procscan"
)

// Leaks lists what is left of container id's task: mounts and directories
// of its compute system, its bundle, and live processes of its Wine silo.
func (n *Node) Leaks(id string) []string {
	sys := filepath.Join(n.EmulationRoot(), id)
	var leaks []string
	for _, m := range emulatednode.Mounts(sys) {
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
