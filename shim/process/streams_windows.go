//go:build windows

package process

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/Microsoft/go-winio"
	"github.com/containerd/errdefs"
)

// openStreams dials the named pipes containerd serves for the process's
// stdio.
func openStreams(ctx context.Context, stdio Stdio) (_ *streams, retErr error) {
	s := &streams{}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	timeout := 10 * time.Second
	if stdio.Stdin != "" {
		c, err := winio.DialPipe(stdio.Stdin, &timeout)
		if err != nil {
			return nil, fmt.Errorf("connect stdin %s: %w", stdio.Stdin, err)
		}
		s.stdin = c
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
		c, err := winio.DialPipe(out.path, &timeout)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", out.path, err)
		}
		*out.dst = c
	}
	if stdio.Terminal && stdio.Stderr != "" {
		return nil, fmt.Errorf("a process with a console has one output stream; stderr %s must be empty: %w", stdio.Stderr, errdefs.ErrInvalidArgument)
	}
	return s, nil
}
