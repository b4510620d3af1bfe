package procexit

import (
	"errors"
	"testing"

	"github.com/containerd/errdefs"
)

func TestExit(t *testing.T) {
	failed := errors.New("waiting for its exit")
	for _, tc := range []struct {
		name      string
		close     bool // Close before the exit
		record    bool // the exit is known
		done      bool // and the output copied
		code      int
		err       error
		wantCheck func(error) bool
		wantCode  int
		wantErr   func(error) bool
	}{
		{name: "running", wantCheck: nil, wantCode: -1, wantErr: errdefs.IsFailedPrecondition},
		{name: "closed while running", close: true, wantCheck: errdefs.IsFailedPrecondition, wantCode: -1, wantErr: errdefs.IsFailedPrecondition},
		{name: "exited, output still copied", record: true, code: 3, wantCheck: errdefs.IsNotFound, wantCode: -1, wantErr: errdefs.IsFailedPrecondition},
		{name: "exited", record: true, done: true, code: 3, wantCheck: errdefs.IsNotFound, wantCode: 3},
		{name: "exit status unsigned", record: true, done: true, code: 0xC0000005, wantCheck: errdefs.IsNotFound, wantCode: 0xC0000005},
		{name: "no exit code", record: true, done: true, code: 5, err: failed, wantCheck: errdefs.IsNotFound, wantCode: -1, wantErr: func(err error) bool { return errors.Is(err, failed) }},
		{name: "closed then exited", close: true, record: true, done: true, wantCheck: errdefs.IsFailedPrecondition, wantCode: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New(7)
			if tc.close {
				if !e.Close() || e.Close() {
					t.Error("Close: first call not reported once")
				}
			}
			if tc.record {
				e.Record(tc.code, tc.err)
				select {
				case <-e.Exited():
				default:
					t.Error("Exited not closed after Record")
				}
			}
			if tc.done {
				e.Done()
			}
			switch err := e.Check(); {
			case tc.wantCheck == nil && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case tc.wantCheck != nil && !tc.wantCheck(err):
				t.Errorf("Check = %v", err)
			}
			code, err := e.ExitCode()
			if code != tc.wantCode {
				t.Errorf("ExitCode = %d, want %d", code, tc.wantCode)
			}
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("ExitCode error %v, want nil", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Errorf("ExitCode error %v", err)
			}
			select {
			case <-e.Wait():
				if !tc.done {
					t.Error("Wait closed before Done")
				}
			default:
				if tc.done {
					t.Error("Wait not closed after Done")
				}
			}
			if e.Closed() != tc.close {
				t.Errorf("Closed = %v", e.Closed())
			}
		})
	}
}
