package winetest

import (
	"errors"
	"os/exec"
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
