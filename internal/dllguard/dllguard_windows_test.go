package dllguard

import (
	"errors"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
)

func TestCall(t *testing.T) {
	sentinel := errors.New("the call's own error")
	tests := []struct {
		name     string
		f        func() error
		want     error
		contains string
	}{
		{"no error", func() error { return nil }, nil, ""},
		{"the call's error", func() error { return sentinel }, sentinel, ""},
		{"missing DLL", func() error {
			windows.NewLazySystemDLL("winproc-no-such.dll").NewProc("Nothing").Addr()
			return nil
		}, errdefs.ErrNotImplemented, "lacks a DLL"},
		{"missing procedure", func() error {
			windows.NewLazySystemDLL("kernel32.dll").NewProc("WinprocNoSuchProcedure").Addr()
			return nil
		}, errdefs.ErrNotImplemented, "WinprocNoSuchProcedure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Call("commit layer", tt.f)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Call = %v, want %v", err, tt.want)
			}
			if tt.contains != "" && (!strings.Contains(err.Error(), tt.contains) || !strings.HasPrefix(err.Error(), "commit layer: ")) {
				t.Errorf("Call = %q, want it to name %q after what failed", err, tt.contains)
			}
		})
	}
}

func TestCallPassesOtherPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "not a DLL" {
			t.Errorf("recovered %v, want the panic to go on", r)
		}
	}()
	Call("x", func() error { panic("not a DLL") })
	t.Error("Call returned")
}
