package hcs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
	shimprocess "github.com/winproc/winproc/shim/process"
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

// A crash's exit status is an NTSTATUS with the top bit set. It reaches
// the task's exit, and so containerd's TaskExit and the kubelet, as the
// unsigned 32-bit value runhcs reports, both when HCS notifies the exit
// and when the process's properties say it exited before the callback.
func TestCrashExitCodeReachesTheTask(t *testing.T) {
	for _, code := range []uint32{0xC000013A, 0xC0000005, 0xFFFFFFFF} {
		t.Run(fmt.Sprintf("%#x", code), func(t *testing.T) {
			_, _, sys, fc := created(t)
			if err := sys.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			exits := make(chan shimprocess.State, 1)
			p := shimprocess.New("ctr", &compute.ProcessSettings{CommandLine: "app.exe"}, shimprocess.Stdio{}, shimprocess.Hooks{
				Notify: func(_ context.Context, st shimprocess.State) { exits <- st },
			})
			if err := p.Start(context.Background(), sys); err != nil {
				t.Fatal(err)
			}
			fc.mu.Lock()
			fp := fc.procs[len(fc.procs)-1]
			fc.mu.Unlock()
			fp.exit(int(code), nil)
			select {
			case st := <-exits:
				if st.ExitStatus != code {
					t.Errorf("the task's exit status is %d, want %d", st.ExitStatus, code)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no exit")
			}
		})
	}
}

func TestCoreExitCodeUnsigned(t *testing.T) {
	a, c := testCore(t)
	sys, err := c.createContainer(context.Background(), "s", testDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	fs := a.existing["s"]
	// Exited before its callback was set: the properties tell.
	a.hold("createProcess")()
	p, err := sys.CreateProcess(context.Background(), &schema2.ProcessParameters{CommandLine: "early.exe"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	fs.mu.Lock()
	fp := fs.procs[0]
	fs.mu.Unlock()
	fp.exit(0xC0000005, nil)
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.ExitCode(); code != 0xC0000005 || err != nil {
		t.Errorf("ExitCode = %d, %v; want %d", code, err, uint32(0xC0000005))
	}
}
