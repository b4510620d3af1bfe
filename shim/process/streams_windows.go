//go:build windows

package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// reconnectLimit is how long output waits for containerd to serve a
// stream's pipe again after it went away (a containerd restart).
const reconnectLimit = 5 * time.Minute

// pipeDisconnected reports the errors of writing to a pipe whose server
// end is gone.
func pipeDisconnected(err error) bool {
	return errors.Is(err, windows.ERROR_NO_DATA) || errors.Is(err, windows.ERROR_PIPE_NOT_CONNECTED) || errors.Is(err, windows.ERROR_BROKEN_PIPE)
}

// openStreams dials the named pipes containerd serves for the process's
// stdio. Output survives a containerd restart: the writers dial again.
func openStreams(ctx context.Context, stdio Stdio) (_ *streams, retErr error) {
	s := &streams{}
	defer func() {
		if retErr != nil {
			s.Close()
		}
	}()
	timeout := 10 * time.Second
	if stdio.Stdin != "" {
		c, err := dialPipe(stdio.Stdin, timeout)
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
		path := out.path
		dial := func() (io.WriteCloser, error) { return dialPipe(path, timeout) }
		w, err := newRedialWriter(ctx, path, dial, pipeDisconnected, reconnectLimit)
		if err != nil {
			return nil, fmt.Errorf("connect %s: %w", path, err)
		}
		*out.dst = w
	}
	return s, nil
}

// dialPipe connects to a pipe containerd serves. Under Wine (the
// project's Windows test nodes), whose wineserver gives the first client
// of a go-winio pipe to the pipe's placeholder instance, where it hangs, a
// first connection is made and closed to use that instance up. On Windows
// the placeholder takes no client, and a throwaway connection would take
// containerd's only Accept: it is made under Wine alone.
func dialPipe(path string, timeout time.Duration) (net.Conn, error) {
	if underWine {
		if c, err := winio.DialPipe(path, &timeout); err == nil {
			c.Close()
		}
	}
	return winio.DialPipe(path, &timeout)
}

// underWine reports whether ntdll is Wine's.
var underWine = windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
