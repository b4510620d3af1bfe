package winetest

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestExitCode(t *testing.T) {
	run := func(script string) error { return exec.Command("sh", "-c", script).Run() }
	for _, tc := range []struct {
		name     string
		err      error
		wantCode int
		wantErr  bool
	}{
		{"success", nil, 0, false},
		{"success with pipes held open", exec.ErrWaitDelay, 0, false},
		{"exit status", run("exit 3"), 3, false},
		{"killed", run("kill -9 $$"), 0, true},
		{"not started", errors.New("exec: no such file"), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, err := ExitCode(tc.err)
			if code != tc.wantCode || (err != nil) != tc.wantErr {
				t.Errorf("ExitCode(%v) = %d, %v; want %d, error %v", tc.err, code, err, tc.wantCode, tc.wantErr)
			}
		})
	}
}

func TestRunTests(t *testing.T) {
	for _, tc := range []struct {
		name     string
		script   string
		mustPass []string
		wantFail bool
	}{
		{"passed", "echo '--- PASS: TestA'", []string{"TestA"}, false},
		{"exit status", "echo '--- PASS: TestA'; exit 1", nil, true},
		{"test missing", "echo '--- SKIP: TestA'", []string{"TestA"}, true},
		{"not started", "exec /nonexistent", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// RunTests fails its test with Fatalf, which ends a goroutine
			// of its own: run it in one and read the verdict.
			rec := &recorder{TB: t}
			done := make(chan string)
			go func() {
				defer close(done)
				done <- RunTests(rec, tc.name, exec.Command("sh", "-c", tc.script), tc.mustPass...)
			}()
			out := <-done
			if rec.failed != tc.wantFail {
				t.Errorf("RunTests failed: %v, want %v (output %q)", rec.failed, tc.wantFail, out)
			}
			if !tc.wantFail && !strings.Contains(out, "--- PASS: TestA") {
				t.Errorf("RunTests returned %q", out)
			}
		})
	}
}

// recorder is a testing.TB whose Fatalf records the failure and ends the
// calling goroutine, as testing's does.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }
