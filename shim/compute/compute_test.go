package compute

import (
	"errors"
	"fmt"
	"testing"

	"github.com/containerd/errdefs"
)

func TestErrNotSupported(t *testing.T) {
	err := fmt.Errorf("signal %v: %w", CtrlBreak, ErrNotSupported)
	if !errors.Is(err, ErrNotSupported) || !errdefs.IsNotImplemented(err) {
		t.Fatalf("%v is not ErrNotSupported and ErrNotImplemented", err)
	}
	if errdefs.IsInvalidArgument(err) || errdefs.IsNotFound(err) {
		t.Fatalf("%v has another class too", err)
	}
}

func TestSignalString(t *testing.T) {
	for s, want := range map[Signal]string{
		CtrlC:        "CTRL_C_EVENT",
		CtrlBreak:    "CTRL_BREAK_EVENT",
		CtrlShutdown: "CTRL_SHUTDOWN_EVENT",
		CtrlClose:    "CTRL_CLOSE_EVENT",
		CtrlLogOff:   "CTRL_LOGOFF_EVENT",
		Signal(0):    "Signal(0)",
		Signal(9):    "Signal(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Signal(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}

func TestMemoryLimitMB(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct{ bytes, mb uint64 }{
		{0, 0},
		{1, 1},
		{mib - 1, 1},
		{mib, 1},
		{mib + 1, 2},
		{1536 * mib, 1536},
		{1536*mib + 512*1024, 1537},
		{^uint64(0), 1 << 44},
	} {
		if got := (Resources{MemoryLimitBytes: tc.bytes}).MemoryLimitMB(); got != tc.mb {
			t.Errorf("MemoryLimitMB(%d bytes) = %d, want %d", tc.bytes, got, tc.mb)
		}
	}
}
