//go:build !windows

package process

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/containerd/fifo"
)

// openStreams opens containerd's fifos. For stdout and stderr the shim also
// opens a read end it never reads: while containerd is restarting nobody
// else holds the fifo open for reading, and a write would fail with EPIPE
// and lose the stream; with it, output waits in the fifo until containerd
// reopens it (containerd's runc shim does the same).
func openStreams(ctx context.Context, stdio Stdio) (_ *streams, retErr error) {
	s := &streams{}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	if stdio.Stdin != "" {
		// As containerd's runc shim does, the shim keeps a writer of its
		// own on the stdin fifo: stdin cannot end before CloseIO says the
		// client is done. Opened read-write, the fifo opens at once, and
		// so does the read end after it; both are in place before anything
		// can close them (CloseIO before Start), so a client's write never
		// meets a fifo without a reader (EPIPE).
		w, err := os.OpenFile(stdio.Stdin, os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open stdin %s: %w", stdio.Stdin, err)
		}
		s.stdinWriter = w
		r, err := os.OpenFile(stdio.Stdin, os.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open stdin %s for reading: %w", stdio.Stdin, err)
		}
		s.stdin = r
	}
	for _, out := range []struct {
		path string
		dst  *io.WriteCloser
	}{
		{stdio.Stdout, &s.stdout},
		{stdio.Stderr, &s.stderr},
	} {
		if out.path == "" {
			continue
		}
		isFifo, err := fifo.IsFifo(out.path)
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", out.path, err)
		}
		if !isFifo {
			// A log file given as a plain path rather than a file:// URI.
			f, err := os.OpenFile(out.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
			if err != nil {
				return nil, fmt.Errorf("open log file %s: %w", out.path, err)
			}
			*out.dst = f
			continue
		}
		w, err := fifo.OpenFifo(ctx, out.path, syscall.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s for writing: %w", out.path, err)
		}
		*out.dst = w
		r, err := fifo.OpenFifo(ctx, out.path, syscall.O_RDONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s for reading: %w", out.path, err)
		}
		s.keepAlive = append(s.keepAlive, r)
	}
	return s, nil
}
