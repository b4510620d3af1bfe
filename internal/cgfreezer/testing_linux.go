//go:build linux

package cgfreezer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Frozen moves pids into a new freezer cgroup name and freezes it; the
// test's cleanup thaws and removes it, as does the function returned.
func Frozen(t testing.TB, name string, pids ...int) (thaw func()) {
	t.Helper()
	c, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	thaw = func() {
		if err := c.Remove(); err != nil {
			t.Errorf("thaw: %v", err)
		}
	}
	t.Cleanup(thaw)
	if err := c.Add(pids...); err != nil {
		t.Fatal(err)
	}
	if err := c.Freeze(); err != nil {
		t.Fatal(err)
	}
	return thaw
}

// Sleeper starts a process that sleeps with its working directory in dir
// (one to freeze, or one that keeps a mount below dir busy) and returns
// its pid and what ends it, also run when the test ends.
func Sleeper(t testing.TB, dir string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }()
	stop = func() {
		cmd.Process.Kill()
		<-waited
	}
	t.Cleanup(stop)
	return cmd.Process.Pid, stop
}

// HeldCgroup makes the cgroup v2 directory held below parent with a
// frozen process in it: a cgroup that cannot be removed until the process
// is thawed and gone. What it returns thaws and ends the process; the
// test's cleanup also removes the directory.
func HeldCgroup(t testing.TB, parent string) (clear func()) {
	t.Helper()
	sub := filepath.Join(parent, "held")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(sub) })
	pid, stop := Sleeper(t, "/")
	if err := os.WriteFile(filepath.Join(sub, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}
	thaw := Frozen(t, "winproc-held-"+strconv.Itoa(pid), pid)
	return func() { thaw(); stop() }
}
