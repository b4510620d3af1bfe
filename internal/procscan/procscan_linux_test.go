package procscan

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

func TestLiveFindsAndSkips(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = append(os.Environ(), "PROCSCAN_TEST_MARK=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	marked := func(_ int, _, environ []byte) bool { return bytes.Contains(environ, []byte("PROCSCAN_TEST_MARK=1")) }
	// Start returns once execve has committed, a moment before the kernel
	// has set up the new program's environment: until then /proc shows
	// none.
	var got []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got = Live(marked); len(got) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(got, []int{cmd.Process.Pid}) {
		t.Fatalf("Live = %v, want [%d]", got, cmd.Process.Pid)
	}
	if c := Comm(cmd.Process.Pid); c != "sleep" {
		t.Errorf("Comm = %q", c)
	}
	if Exited(cmd.Process.Pid) {
		t.Error("Exited of a running process")
	}
	cmd.Process.Kill()
	// Killed and not reaped yet: a zombie has exited.
	for deadline := time.Now().Add(5 * time.Second); !Exited(cmd.Process.Pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Exited is false 5 s after SIGKILL")
		}
	}
	cmd.Wait()
	if !Exited(cmd.Process.Pid) {
		t.Error("Exited of a reaped process")
	}
	if got := Live(marked); len(got) != 0 {
		t.Errorf("Live after exit = %v", got)
	}
}
