package process

import (
	"errors"
	"io"
)

// streams are the shim's ends of containerd's stdio for one process.
type streams struct {
	stdin          io.ReadCloser
	stdout, stderr io.WriteCloser
	// keepAlive holds ends the shim opens only so that the streams survive
	// containerd going away (a restart) and coming back.
	keepAlive []io.Closer
}

// Close closes every end.
func (s *streams) Close() error {
	var errs []error
	for _, c := range append([]io.Closer{s.stdin, s.stdout, s.stderr}, s.keepAlive...) {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}
