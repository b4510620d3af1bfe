package pause

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// These tests run pause as a real process, natively and as pause.exe under
// Wine, and stop it the way a container runtime would.

func nativeBinary(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "pause")
	if b, err := exec.Command("go", "build", "-o", exe, "github.com/winproc/winproc/cmd/pause").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return exe
}

type launcher struct {
	name    string
	command func(t *testing.T, args ...string) *exec.Cmd
}

func launchers(t *testing.T) []launcher {
	return []launcher{
		{name: "native", command: func(t *testing.T, args ...string) *exec.Cmd {
			return exec.Command(nativeBinary(t), args...)
		}},
		{name: "wine", command: func(t *testing.T, args ...string) *exec.Cmd {
			prefix := winetest.Prefix(t)
			exe := winetest.BuildExe(t, "github.com/winproc/winproc/cmd/pause")
			return winetest.Command(context.Background(), t, prefix, exe, args...)
		}},
	}
}

func TestStopsOnSignal(t *testing.T) {
	for _, l := range launchers(t) {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			if l.name == "wine" && sig == syscall.SIGTERM {
				// Wine turns only SIGINT into a console event (CTRL_C);
				// SIGTERM ends a Wine process without one.
				continue
			}
			t.Run(l.name+"/"+sig.String(), func(t *testing.T) {
				var stdout, stderr bytes.Buffer
				cmd := l.command(t)
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- cmd.Wait() }()
				t.Cleanup(func() {
					if cmd.ProcessState == nil {
						cmd.Process.Kill()
						<-exited
					}
				})

				ticks := waitIdle(t, cmd.Process.Pid, exited)
				// Idle means idle: two more seconds cost it next to no CPU
				// time (a busy wait would cost 200 ticks; Wine's own
				// threads may wake now and then).
				time.Sleep(2 * time.Second)
				later := cpuTicks(t, cmd.Process.Pid)
				t.Logf("CPU while waiting: %d clock ticks in 2 s", later-ticks)
				if later-ticks > 4 {
					t.Errorf("pause used %d clock ticks of CPU in 2 s of waiting", later-ticks)
				}

				start := time.Now()
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-exited:
					if code, err := winetest.ExitCode(err); code != 0 || err != nil {
						t.Fatalf("exit: %d, %v (stderr %q)", code, err, stderr.String())
					}
				case <-time.After(5 * time.Second):
					t.Fatalf("still running 5 s after %v", sig)
				}
				took := time.Since(start)
				t.Logf("exited %v after %v", took, sig)
				if took > time.Second {
					t.Errorf("took %v to exit after %v, want under 1 s", took, sig)
				}
				if got := strings.TrimSpace(stdout.String()); got != Message {
					t.Errorf("stdout = %q, want %q", got, Message)
				}
			})
		}
	}
}

func TestUnknownFlagExitStatus(t *testing.T) {
	for _, l := range launchers(t) {
		t.Run(l.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := l.command(t, "-bogus")
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 {
				t.Fatalf("run: %v, want exit status 2", err)
			}
			if !strings.Contains(stderr.String(), "Usage of pause") {
				t.Errorf("stderr = %q, want usage", stderr.String())
			}
		})
	}
}

// waitIdle waits until process pid sleeps and its CPU time has not moved for
// a second: it has finished starting (for Wine, loading the program and its
// runtime) and waits for a stop event. It returns the CPU time in clock ticks.
func waitIdle(t *testing.T, pid int, exited <-chan error) uint64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last, stable := uint64(0), 0
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("exited before any signal: %v", err)
		case <-time.After(250 * time.Millisecond):
		}
		state, ticks := procStat(t, pid)
		if state == "S" && ticks == last {
			stable++
		} else {
			stable = 0
		}
		last = ticks
		if stable >= 4 {
			return ticks
		}
	}
	t.Fatalf("process %d never settled", pid)
	return 0
}

func cpuTicks(t *testing.T, pid int) uint64 {
	_, ticks := procStat(t, pid)
	return ticks
}

// procStat reads the state and utime+stime of pid from /proc/pid/stat.
func procStat(t *testing.T, pid int) (string, uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name may hold spaces; fields after it are fixed.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	var utime, stime uint64
	fmt.Sscan(fields[11], &utime)
	fmt.Sscan(fields[12], &stime)
	return fields[0], utime + stime
}
