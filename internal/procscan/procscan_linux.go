// Package procscan finds live processes by what /proc says of them; the
// integration tests and the demo use it to prove nothing of theirs is left.
package procscan

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Live lists live (not zombie) processes other than this one for which keep
// is true. Zombies are skipped: PID 1 of these machines does not reap
// orphans.
func Live(keep func(pid int, cmdline, environ []byte) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if Exited(pid) {
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

// Exited tells whether pid has exited: it is gone, a zombie, or dead.
// A dying process's command line empties before it exits, so a wait for
// a killed process reads its state, not its command line.
func Exited(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// Comm returns the command name of pid.
func Comm(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return strings.TrimSpace(string(b))
}
