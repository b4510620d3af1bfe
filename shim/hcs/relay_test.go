package hcs

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/syncbuffer"
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
	var hcsCloses int
	var mu sync.Mutex
	closeHCS := func() error { mu.Lock(); hcsCloses++; mu.Unlock(); return nil }
	var stdout, stderr syncbuffer.Buffer
	r := startRelay(stdin, outR, errR, strings.NewReader("input\n"), &stdout, &stderr, closeHCS, log.L)

	got, err := io.ReadAll(inR) // ends when the relay closes stdin
	if err != nil || string(got) != "input\n" {
		t.Fatalf("process read %q, %v", got, err)
	}
	mu.Lock()
	if hcsCloses != 1 {
		t.Errorf("HCS CloseStdin called %d times", hcsCloses)
	}
	mu.Unlock()
	if stdin.count() != 1 {
		t.Errorf("stdin pipe closed %d times", stdin.count())
	}
	// Closing again (CloseStdin, exit) does nothing more.
	if err := r.closeStdin(); err != nil {
		t.Error(err)
	}
	r.closeStdinPipe()
	if stdin.count() != 1 {
		t.Errorf("stdin pipe closed %d times", stdin.count())
	}

	go func() {
		io.WriteString(outW, "out")
		io.WriteString(errW, "err")
		outW.Close()
	}()
	notWithin(t, r.outputDone, 50*time.Millisecond, "output done with stderr open")
	errW.Close()
	within(t, r.outputDone, "output done")
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
	r := startRelay(inW, nil, nil, src, nil, nil, func() error { close(closed); return nil }, log.L)
	srcW.CloseWithError(errors.New("caller's stdin broke"))
	within(t, closed, "HCS CloseStdin after a failed read")
	if _, err := io.ReadAll(inR); err != nil {
		t.Errorf("process stdin: %v", err)
	}
	within(t, r.outputDone, "output done without outputs")
}

func TestRelayUnconnectedStdinClosedAtOnce(t *testing.T) {
	inR, inW := io.Pipe()
	closed := false
	startRelay(inW, nil, nil, nil, nil, nil, func() error { closed = true; return nil }, log.L)
	if !closed {
		t.Error("HCS CloseStdin not called for a stdin nobody writes")
	}
	if _, err := io.ReadAll(inR); err != nil {
		t.Error(err)
	}
}

func TestRelayCloseOutputEndsCopies(t *testing.T) {
	outR, outW := io.Pipe()
	defer outW.Close()
	var stdout syncbuffer.Buffer
	r := startRelay(nil, outR, nil, nil, &stdout, nil, nil, log.L)
	io.WriteString(outW, "partial")
	notWithin(t, r.outputDone, 50*time.Millisecond, "output done while the pipe is open")
	r.closeOutput()
	within(t, r.outputDone, "output done after closeOutput")
	r.closeOutput() // idempotent
	if stdout.String() != "partial" {
		t.Errorf("stdout %q", stdout.String())
	}
}

func TestRelayCloseStdinErrors(t *testing.T) {
	_, inW := io.Pipe()
	hcsErr := errors.New("hcs close stdin failed")
	src, srcW := io.Pipe()
	defer srcW.Close()
	r := startRelay(inW, nil, nil, src, nil, nil, func() error { return hcsErr }, log.L)
	if err := r.closeStdin(); !errors.Is(err, hcsErr) {
		t.Errorf("closeStdin = %v", err)
	}
	if err := r.closeStdin(); !errors.Is(err, hcsErr) {
		t.Errorf("second closeStdin = %v, want the first's error", err)
	}
}
