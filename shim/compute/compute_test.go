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
		Signal(0):    "Signal(0)",
		Signal(9):    "Signal(9)",
	} {
		if got := s.String(); got != want {
			t.Errorf("Signal(%d).String() = %q, want %q", int(s), got, want)
		}
	}
}
