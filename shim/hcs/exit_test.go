package hcs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

func TestProcessExit(t *testing.T) {
	closedErr := errors.New("the handle has already been closed")
	waitErr := errors.New("lost communication with compute service")
	cases := []struct {
		name          string
		werr          error
		wf            errFacts
		code          int
		cerr          error
		closed, lost  bool
		wantCode      int
		wantClass     func(error) bool // nil: no error
		wantErrInside error
	}{
		{name: "exit 0", code: 0, wantCode: 0},
		{name: "exit 3", code: 3, wantCode: 3},
		{name: "NTSTATUS exit", code: 0xC000013A, wantCode: 0xC000013A},
		{name: "all bits", code: 0xFFFFFFFF, wantCode: 0xFFFFFFFF},
		{name: "no exit code from HCS", code: -1, wantCode: -1, wantClass: errdefs.IsUnavailable},
		{name: "exit code query failed", code: -1, cerr: waitErr, wantCode: -1, wantClass: errdefs.IsUnavailable, wantErrInside: waitErr},
		{name: "wait failed", werr: waitErr, code: -1, cerr: waitErr, wantCode: -1, wantClass: errdefs.IsUnavailable, wantErrInside: waitErr},
		{name: "closed by Close", werr: closedErr, wf: errFacts{AlreadyClosed: true}, code: -1, cerr: closedErr, closed: true, wantCode: -1, wantClass: errdefs.IsFailedPrecondition},
		{name: "lost with its system", werr: closedErr, wf: errFacts{AlreadyClosed: true}, code: -1, cerr: closedErr, closed: false, lost: true, wantCode: -1, wantClass: errdefs.IsUnavailable},
		{name: "lost wins over closed", werr: closedErr, wf: errFacts{AlreadyClosed: true}, code: -1, cerr: closedErr, closed: true, lost: true, wantCode: -1, wantClass: errdefs.IsUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, err := processExit(7, tc.werr, tc.wf, tc.code, tc.cerr, tc.closed, tc.lost)
			if code != tc.wantCode {
				t.Errorf("code = %d, want %d", code, tc.wantCode)
			}
			switch {
			case tc.wantClass == nil && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.wantClass != nil && (err == nil || !tc.wantClass(err)):
				t.Errorf("error %v is not of the expected class", err)
			case tc.wantErrInside != nil && !errors.Is(err, tc.wantErrInside):
				t.Errorf("error %v does not wrap %v", err, tc.wantErrInside)
			}
		})
	}
}

func TestSystemExit(t *testing.T) {
	closedErr := errors.New("the handle has already been closed")
	unexpected := fmt.Errorf("hcs::System::waitBackground: %w", syscall.Errno(0xC0370106))
	cases := []struct {
		name              string
		err               error
		f                 errFacts
		closed, requested bool
		stopped           bool
		class             func(error) bool // nil: ExitError is nil
	}{
		{name: "clean exit", stopped: true},
		{name: "requested", requested: true, stopped: true},
		{name: "unexpected exit", err: unexpected, stopped: true, class: func(err error) bool { return errors.Is(err, unexpected) }},
		{name: "unexpected exit while stopping is still a requested stop", err: unexpected, requested: true, stopped: true},
		{name: "our Close first", err: closedErr, f: errFacts{AlreadyClosed: true}, closed: true, class: errdefs.IsFailedPrecondition},
		{name: "closed by hcsshim", err: closedErr, f: errFacts{AlreadyClosed: true}, class: errdefs.IsUnavailable},
		{name: "closed even when requested", err: closedErr, f: errFacts{AlreadyClosed: true}, closed: true, requested: true, class: errdefs.IsFailedPrecondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stopped, err := systemExit("c", tc.err, tc.f, tc.closed, tc.requested)
			if stopped != tc.stopped {
				t.Errorf("stopped = %v, want %v", stopped, tc.stopped)
			}
			switch {
			case tc.class == nil && err != nil:
				t.Errorf("unexpected ExitError %v", err)
			case tc.class != nil && (err == nil || !tc.class(err)):
				t.Errorf("ExitError %v is not of the expected class", err)
			}
		})
	}
}

func TestStopResult(t *testing.T) {
	pending := fmt.Errorf("container c encountered an error during Shutdown: %w", syscall.Errno(0xC0370103))
	stopped := syscall.Errno(0xC0370110)
	other := errors.New("boom")
	cases := []struct {
		name     string
		err      error
		accepted bool
		class    func(error) bool
	}{
		{"nil", nil, true, nil},
		{"pending is accepted", pending, true, nil},
		{"already stopped", stopped, false, errdefs.IsNotFound},
		{"gone", syscall.Errno(0xC037010E), false, errdefs.IsNotFound},
		{"invalid state", syscall.Errno(0xC0370105), false, errdefs.IsFailedPrecondition},
		{"other", other, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := errnoFacts(tc.err)
			accepted, err := stopResult(tc.err, f)
			if accepted != tc.accepted {
				t.Errorf("accepted = %v", accepted)
			}
			if accepted != (err == nil) {
				t.Errorf("accepted %v with error %v", accepted, err)
			}
			if tc.class != nil && !tc.class(classify("stop", err, f)) {
				t.Errorf("%v is not of the expected class", err)
			}
		})
	}
}
