//go:build linux

package wincat

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestExeUnderWine runs the real wincat.exe under Wine, fed through OS pipes
// as containerd does. The cases are subtests of one test because the exe
// lives in BuildExe's per-test temporary directory: built once here, it
// serves them all.
func TestExeUnderWine(t *testing.T) {
	prefix := winetest.Prefix(t)
	exe := winetest.BuildExe(t, "github.com/winproc/winproc/cmd/wincat")
	echoPort := serve(t, listen(t, "tcp4", "127.0.0.1:0"), echo)
	closed := closedPort(t)

	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string // in the one line wincat writes; "" for no line
	}{
		{"echo", []string{"127.0.0.1", echoPort}, "hello", 0, "hello", ""},
		{"refused", []string{"127.0.0.1", closed}, "", 1, "", "wincat: connect 127.0.0.1:" + closed + ": "},
		{"one arg", []string{"127.0.0.1"}, "", 1, "", "usage: wincat <host> <port>"},
		{"three args", []string{"127.0.0.1", echoPort, "x"}, "", 1, "", "usage: wincat <host> <port>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // Wine startup dominates; the cases share one wineserver
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := winetest.Command(ctx, t, prefix, exe, tt.args...)
			cmd.Stdin = strings.NewReader(tt.stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			code, err := winetest.ExitCode(cmd.Run())
			if err != nil {
				t.Fatalf("run wine: %v", err)
			}

			if code != tt.wantCode {
				t.Errorf("exit status %d, want %d (stderr %q)", code, tt.wantCode, stderr.String())
			}
			if got := stdout.String(); got != tt.wantStdout {
				t.Errorf("stdout %q, want %q", got, tt.wantStdout)
			}
			if tt.wantStderr == "" {
				if stderr.Len() != 0 {
					t.Errorf("stderr %q, want none", stderr.String())
				}
			} else {
				checkLine(t, stderr.String(), tt.wantStderr)
			}
		})
	}
}
