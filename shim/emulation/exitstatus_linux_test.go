//go:build linux

package emulation

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
)

// A process killed after it called exit() (what the wineserver does to one
// whose exit is slow) still reports the status it passed to exit(), through
// the recorder (build/wine/exitstatus.c); one killed before exit() reports
// nothing. A plain Linux program stands in for Wine's final process image.
func TestExitStatusRecordSurvivesKill(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: `make wine` installs it")
	}
	dir := t.TempDir()
	lib := filepath.Join(dir, "exitstatus.so")
	if out, err := exec.Command(gcc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", lib, "../../build/wine/exitstatus.c", "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build the recorder: %v\n%s", err, out)
	}
	// exit(7) runs a handler that announces itself and hangs, as an exit
	// stuck on a lock does; "before" hangs before calling exit().
	src := filepath.Join(dir, "stuck.c")
	prog := filepath.Join(dir, "stuck")
	if err := os.WriteFile(src, []byte(`#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void hang(void) { puts("exiting"); fflush(stdout); for (;;) pause(); }
int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "before") == 0) { puts("exiting"); fflush(stdout); for (;;) pause(); }
	atexit(hang);
	exit(7);
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("build the program: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOK   bool
	}{
		{"killed in exit", nil, 7, true},
		{"killed before exit", []string{"before"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out syncbuffer.Buffer
			cmd := exec.Command(prog, tc.args...)
			cmd.Env = append(os.Environ(), "WINELOADERNOEXEC=1")
			cmd.Stdout = &out
			p := &process{cmd: cmd}
			w, err := p.recordExitStatus(lib)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.exitRecord.Close() })
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			p.pid = cmd.Process.Pid
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(out.String(), "exiting") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cmd.Process.Kill()
			err = cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("the program ended with %v, want the kill", err)
			}
			if code, ok := p.recordedExit(); code != tc.wantCode || ok != tc.wantOK {
				t.Errorf("recorded %d, %v; want %d, %v", code, ok, tc.wantCode, tc.wantOK)
			}
		})
	}
}
