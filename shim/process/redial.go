package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/containerd/log"
)

// redialWriter writes a process's output to containerd's end of a stream
// and, when that end goes away (containerd restarting drops the named
// pipes it serves on Windows), dials it again and writes the rest, within
// limit. runhcs does the same for the same reason.
type redialWriter struct {
	ctx          context.Context
	name         string
	dial         func() (io.WriteCloser, error)
	disconnected func(error) bool
	limit        time.Duration

	mu     sync.Mutex
	conn   io.WriteCloser
	closed bool
}

var errWriterClosed = errors.New("stream closed")

func newRedialWriter(ctx context.Context, name string, dial func() (io.WriteCloser, error), disconnected func(error) bool, limit time.Duration) (*redialWriter, error) {
	conn, err := dial()
	if err != nil {
		return nil, err
	}
	return &redialWriter{ctx: ctx, name: name, dial: dial, disconnected: disconnected, limit: limit, conn: conn}, nil
}

func (w *redialWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	written := 0
	for {
		if w.closed {
			return written, errWriterClosed
		}
		n, err := w.conn.Write(p[written:])
		written += n
		if err == nil || !w.disconnected(err) {
			return written, err
		}
		log.G(w.ctx).WithError(err).WithField("stream", w.name).Warn("containerd's end of the stream went away; dialing it again")
		w.conn.Close()
		conn, derr := w.redial()
		if derr != nil {
			return written, fmt.Errorf("%w; reconnect: %w", err, derr)
		}
		w.conn = conn
		log.G(w.ctx).WithField("stream", w.name).Info("reconnected")
	}
}

// redial dials until it succeeds or limit passes, backing off from 10 ms to
// 1 s between attempts.
func (w *redialWriter) redial() (io.WriteCloser, error) {
	deadline := time.Now().Add(w.limit)
	wait := 10 * time.Millisecond
	for {
		conn, err := w.dial()
		if err == nil {
			return conn, nil
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("%s did not come back within %v: %w", w.name, w.limit, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

func (w *redialWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return w.conn.Close()
}
