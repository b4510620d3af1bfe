package process

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

var errGone = errors.New("pipe server went away")

// pipeEnd is containerd's end of a stream: it takes writes until broken.
type pipeEnd struct {
	got    bytes.Buffer
	broken bool
	closed bool
}

func (p *pipeEnd) Write(b []byte) (int, error) {
	if p.broken {
		return 0, errGone
	}
	return p.got.Write(b)
}

func (p *pipeEnd) Close() error { p.closed = true; return nil }

// pipeServer hands out ends; while down, dials fail.
type pipeServer struct {
	ends      []*pipeEnd
	downDials int
	dials     int
}

func (s *pipeServer) dial() (io.WriteCloser, error) {
	s.dials++
	if len(s.ends) > 0 && s.downDials > 0 {
		s.downDials--
		return nil, errGone
	}
	e := &pipeEnd{}
	s.ends = append(s.ends, e)
	return e, nil
}

func isGone(err error) bool { return errors.Is(err, errGone) }

// containerd restarts between two writes: the second write reconnects and
// arrives whole on the new end.
func TestRedialWriterReconnects(t *testing.T) {
	s := &pipeServer{}
	w, err := newRedialWriter(context.Background(), "stdout", s.dial, isGone, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	s.ends[0].broken = true
	s.downDials = 2 // containerd takes a moment to serve the pipe again
	if n, err := w.Write([]byte("after")); err != nil || n != 5 {
		t.Fatalf("write across the restart: %d, %v", n, err)
	}
	if len(s.ends) != 2 || s.ends[0].got.String() != "before" || s.ends[1].got.String() != "after" || !s.ends[0].closed {
		t.Fatalf("ends after restart: %d; first %q closed %v", len(s.ends), s.ends[0].got.String(), s.ends[0].closed)
	}
	if s.dials != 4 {
		t.Errorf("dials %d, want 4 (first, two while down, success)", s.dials)
	}
	w.Close()
	if _, err := w.Write([]byte("x")); !errors.Is(err, errWriterClosed) {
		t.Errorf("write after close: %v", err)
	}
}

func TestRedialWriterLimits(t *testing.T) {
	t.Run("other errors are not retried", func(t *testing.T) {
		s := &pipeServer{}
		w, _ := newRedialWriter(context.Background(), "stdout", s.dial, func(error) bool { return false }, time.Second)
		s.ends[0].broken = true
		if _, err := w.Write([]byte("x")); !errors.Is(err, errGone) || s.dials != 1 {
			t.Errorf("write: %v after %d dials; want the error, no redial", err, s.dials)
		}
	})
	t.Run("gives up after the limit", func(t *testing.T) {
		s := &pipeServer{}
		w, _ := newRedialWriter(context.Background(), "stdout", s.dial, isGone, 100*time.Millisecond)
		s.ends[0].broken = true
		s.downDials = 1 << 30
		start := time.Now()
		if _, err := w.Write([]byte("x")); !errors.Is(err, errGone) {
			t.Errorf("write: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("gave up after %v, limit 100ms", took)
		}
	})
	t.Run("first dial fails", func(t *testing.T) {
		fails := func() (io.WriteCloser, error) { return nil, errGone }
		if _, err := newRedialWriter(context.Background(), "stdout", fails, isGone, time.Second); err == nil {
			t.Fatal("first dial failure not reported")
		}
	})
}
