package relay

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/testwait"
)

// countingCloser counts Close calls of a pipe end.
type countingCloser struct {
	io.WriteCloser
	mu     sync.Mutex
	closes int
}

func (c *countingCloser) Close() error {
	c.mu.Lock()
	c.closes++
	c.mu.Unlock()
	return c.WriteCloser.Close()
}

func (c *countingCloser) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closes
}

func TestRelayCopiesAndClosesStdinAtEOF(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	stdin := &countingCloser{WriteCloser: inW}
	var backendCloses int
	var mu sync.Mutex
	closeBackend := func() error { mu.Lock(); backendCloses++; mu.Unlock(); return nil }
	var stdout, stderr syncbuffer.Buffer
	r := Start(stdin, outR, errR, strings.NewReader("input\n"), &stdout, &stderr, closeBackend, log.L)

	got, err := io.ReadAll(inR) // ends when the relay closes stdin
	if err != nil || string(got) != "input\n" {
		t.Fatalf("process read %q, %v", got, err)
	}
	mu.Lock()
	if backendCloses != 1 {
		t.Errorf("the backend's stdin close called %d times", backendCloses)
	}
	mu.Unlock()
	if stdin.count() != 1 {
		t.Errorf("stdin pipe closed %d times", stdin.count())
	}
	// Closing again (CloseStdin, exit) does nothing more.
	if err := r.CloseStdin(); err != nil {
		t.Error(err)
	}
	r.CloseStdinPipe()
	if stdin.count() != 1 {
		t.Errorf("stdin pipe closed %d times", stdin.count())
	}

	go func() {
		io.WriteString(outW, "out")
		io.WriteString(errW, "err")
		outW.Close()
	}()
	notWithin(t, r.OutputDone(), 50*time.Millisecond, "output done with stderr open")
	errW.Close()
	within(t, r.OutputDone(), "output done")
	if stdout.String() != "out" || stderr.String() != "err" {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	// The relay closed its ends of the output pipes.
	if _, err := outW.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("stdout pipe still open: %v", err)
	}
}

func TestRelayStdinFailureClosesStdin(t *testing.T) {
	inR, inW := io.Pipe()
	src, srcW := io.Pipe()
	closed := make(chan struct{})
	r := Start(inW, nil, nil, src, nil, nil, func() error { close(closed); return nil }, log.L)
	srcW.CloseWithError(errors.New("caller's stdin broke"))
	within(t, closed, "the backend's stdin close after a failed read")
	if _, err := io.ReadAll(inR); err != nil {
		t.Errorf("process stdin: %v", err)
	}
	within(t, r.OutputDone(), "output done without outputs")
}

func TestRelayUnconnectedStdinClosedAtOnce(t *testing.T) {
	inR, inW := io.Pipe()
	closed := false
	Start(inW, nil, nil, nil, nil, nil, func() error { closed = true; return nil }, log.L)
	if !closed {
		t.Error("the backend's stdin close not called for a stdin nobody writes")
	}
	if _, err := io.ReadAll(inR); err != nil {
		t.Error(err)
	}
}

func TestRelayCloseOutputEndsCopies(t *testing.T) {
	outR, outW := io.Pipe()
	defer outW.Close()
	var stdout syncbuffer.Buffer
	r := Start(nil, outR, nil, nil, &stdout, nil, nil, log.L)
	io.WriteString(outW, "partial")
	notWithin(t, r.OutputDone(), 50*time.Millisecond, "output done while the pipe is open")
	r.CloseOutput()
	within(t, r.OutputDone(), "output done after closeOutput")
	r.CloseOutput() // idempotent
	if stdout.String() != "partial" {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestRelayCloseStdinErrors(t *testing.T) {
	_, inW := io.Pipe()
	backendErr := errors.New("the backend's stdin close failed")
	src, srcW := io.Pipe()
	defer srcW.Close()
	r := Start(inW, nil, nil, src, nil, nil, func() error { return backendErr }, log.L)
	if err := r.CloseStdin(); !errors.Is(err, backendErr) {
		t.Errorf("closeStdin = %v", err)
	}
	if err := r.CloseStdin(); !errors.Is(err, backendErr) {
		t.Errorf("second closeStdin = %v, want the first's error", err)
	}
}

func TestRelayDrain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		closeOut bool // the process's last writer ends the output
		wantFast bool // Drain returns before its timeout
	}{
		{name: "output ends", closeOut: true, wantFast: true},
		{name: "output held open", closeOut: false, wantFast: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outR, outW := io.Pipe()
			t.Cleanup(func() { outW.Close() })
			var stdout syncbuffer.Buffer
			r := Start(nil, outR, nil, nil, &stdout, nil, nil, log.L)
			io.WriteString(outW, "last words")
			if tc.closeOut {
				outW.Close()
			}
			const timeout = 300 * time.Millisecond
			start := time.Now()
			r.Drain(timeout)
			took := time.Since(start)
			if fast := took < timeout; fast != tc.wantFast {
				t.Errorf("Drain took %v with a timeout of %v", took, timeout)
			}
			// Either way the copies have ended and the pipes are closed.
			within(t, r.OutputDone(), "output done after Drain")
			if _, err := outW.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("stdout pipe still open after Drain: %v", err)
			}
			if stdout.String() != "last words" {
				t.Errorf("stdout %q", stdout.String())
			}
		})
	}
}

// within and notWithin wait as every package's tests do.
var within, notWithin = testwait.Within, testwait.NotWithin
