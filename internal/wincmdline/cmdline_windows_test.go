package wincmdline

import (
	"syscall"
	"testing"
)

// TestEscapeArgMatchesSyscall checks EscapeArg against Go's own Windows
// escaping, where the Windows test binary runs.
func TestEscapeArgMatchesSyscall(t *testing.T) {
	for _, tc := range escapeTests {
		if got, want := EscapeArg(tc.in), syscall.EscapeArg(tc.in); got != want {
			t.Errorf("EscapeArg(%#q) = %#q, syscall.EscapeArg = %#q", tc.in, got, want)
		}
	}
}
