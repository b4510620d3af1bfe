package pause

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStatus int
		wantStdout string
		wantStderr string
	}{
		{name: "version", args: []string{"-v"}, wantStatus: 0, wantStdout: "pause 1.2.3\n"},
		{name: "unknown flag", args: []string{"-x"}, wantStatus: 2, wantStderr: "flag provided but not defined: -x"},
		{name: "unknown flag shows usage", args: []string{"--bogus"}, wantStatus: 2, wantStderr: "Usage of pause"},
		{name: "stray argument", args: []string{"now"}, wantStatus: 2, wantStderr: `unexpected argument "now"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := Run(context.Background(), tc.args, "1.2.3", &stdout, &stderr)
			if status != tc.wantStatus {
				t.Errorf("status = %d, want %d (stderr %q)", status, tc.wantStatus, stderr.String())
			}
			if tc.wantStdout != "" && stdout.String() != tc.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.wantStderr)
			}
		})
	}
}

func TestRunWaitsUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stdout bytes.Buffer
	go func() { done <- Run(ctx, nil, "dev", &stdout, &stdout) }()

	select {
	case status := <-done:
		t.Fatalf("Run returned %d before any stop event", status)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	select {
	case status := <-done:
		if status != 0 {
			t.Errorf("status = %d, want 0", status)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if stdout.Len() != 0 {
		t.Errorf("printed %q without a stop event", stdout.String())
	}
}
