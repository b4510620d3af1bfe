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

// buildC compiles the C source src into dir/name with gcc and args (a
// shared library when args say so), skipping the test without gcc.
func buildC(t *testing.T, dir, name, src string, args ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc: `make wine` installs it")
	}
	out := filepath.Join(dir, name)
	if !strings.HasSuffix(src, ".c") {
		file := out + ".c"
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		src = file
	}
	cmd := exec.Command(gcc, append([]string{"-O2", "-Wall", "-Werror", "-o", out, src}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, b)
	}
	return out
}

// buildExitLibrary builds build/wine/wineexit.c as `make wine` does.
func buildExitLibrary(t *testing.T, dir string) string {
	return buildC(t, dir, "wineexit.so", "../../build/wine/wineexit.c", "-shared", "-fPIC", "-ldl", "-lpthread")
}

// The exit library loads glibc's unwinder when the process starts and ends
// threads with asynchronous signals blocked (SIGQUIT is how the wineserver
// ends the other threads of an exiting process), leaving faults deliverable;
// without it neither holds, which is how about 1 graceful exit in 80 of a
// Go program under Wine hung or crashed (build/wine/wineexit.c). A plain
// Linux program stands in for Wine's final process image.
func TestExitLibraryEndsThreadsSafely(t *testing.T) {
	dir := t.TempDir()
	lib := buildExitLibrary(t, dir)
	prog := buildC(t, dir, "threadexit", `#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
static void report(void *arg) {
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	printf("quit=%s segv=%s\n", sigismember(&cur, SIGQUIT) ? "blocked" : "open",
		sigismember(&cur, SIGSEGV) ? "blocked" : "open");
}
static void *run(void *arg) {
	pthread_cleanup_push(report, NULL);
	pthread_exit(NULL);
	pthread_cleanup_pop(0);
	return NULL;
}
int main(void) {
	printf("unwinder=%s preload=%s\n", dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD) ? "loaded" : "absent",
		getenv("LD_PRELOAD") ? "visible" : "hidden");
	fflush(stdout);
	pthread_t th;
	pthread_create(&th, NULL, run, NULL);
	pthread_join(th, NULL);
	return 0;
}
`, "-ldl", "-lpthread")

	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"with the library", []string{"LD_PRELOAD=" + lib}, "unwinder=loaded preload=hidden\nquit=blocked segv=open\n"},
		{"without", nil, "unwinder=absent preload=hidden\nquit=open segv=open\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(prog)
			cmd.Env = append(append(os.Environ(), "WINELOADERNOEXEC=1"), tc.env...)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", prog, err)
			}
			if string(out) != tc.want {
				t.Errorf("the program printed %q, want %q", out, tc.want)
			}
		})
	}
}

// A process killed after it called exit() (what the wineserver does to one
// whose exit is slow) still reports the status it passed to exit(), through
// the recorder (build/wine/wineexit.c); one killed before exit() reports
// nothing. A plain Linux program stands in for Wine's final process image.
func TestExitStatusRecordSurvivesKill(t *testing.T) {
	dir := t.TempDir()
	lib := buildExitLibrary(t, dir)
	// exit(7) runs a handler that announces itself and hangs, as an exit
	// stuck on a lock does; "before" hangs before calling exit().
	prog := buildC(t, dir, "stuck", `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static void hang(void) { puts("exiting"); fflush(stdout); for (;;) pause(); }
int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "before") == 0) { puts("exiting"); fflush(stdout); for (;;) pause(); }
	atexit(hang);
	exit(7);
}
`)

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
