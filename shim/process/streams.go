package process

import (
	"errors"
	"io"
	"sync"
)

// streams are the shim's ends of containerd's stdio for one process.
type streams struct {
	stdin          io.ReadCloser
	stdout, stderr io.WriteCloser
	// keepAlive holds ends the shim opens only so that the streams survive
	// containerd going away (a restart) and coming back.
	keepAlive []io.Closer
	// stdinWriter is the shim's own write end of a stdin fifo (nil for a
	// pipe containerd serves, which containerd closes itself once the
	// client's input has ended). While it is open, stdin cannot reach EOF
	// before CloseIO, however often the client reconnects; closing it at
	// CloseIO lets the process read every byte still in the fifo, then EOF.
	stdinWriter io.Closer
	stdinOnce   sync.Once
}

// closeStdinWriter lets stdin reach EOF once every client end is closed
// and the buffered bytes are read.
func (s *streams) closeStdinWriter() {
	s.stdinOnce.Do(func() {
		if s.stdinWriter != nil {
			s.stdinWriter.Close()
		}
	})
}

// Close closes every end.
func (s *streams) Close() error {
	var errs []error
	s.closeStdinWriter()
	for _, c := range append([]io.Closer{s.stdin, s.stdout, s.stderr}, s.keepAlive...) {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
