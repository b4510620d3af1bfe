package wincat

import (
	"context"
	"fmt"
	"io"
	"net"
)

// Relay copies conn to stdout and stdin to conn, then closes conn.
//
// When stdin ends, Relay half-closes conn so that the remote side sees EOF
// and can still reply. Relay returns once the copy to stdout is done, that
// is once the remote side has finished sending or the connection broke; it
// does not wait for stdin to end (see below). It returns an error naming
// the direction when the copy to stdout failed or the copy from stdin had
// failed; a failed copy from stdin also resets conn. When ctx is done, Relay
// resets conn and returns the context's error.
//
// The copies use io.Copy on the connection itself, so the TCP fast paths
// (splice, sendfile, single large writes) apply.
func Relay(ctx context.Context, conn net.Conn, stdin io.Reader, stdout io.Writer) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { abort(conn) })

	sent := make(chan error, 1)
	go func() {
		err := send(conn, stdin)
		sent <- err // before abort, so that the error is in when the copy below ends
		if err != nil {
			// A truncated request must not look complete to the remote side:
			// reset the connection instead of leaving it a clean EOF. This
			// also ends the copy to stdout.
			abort(conn)
		}
	}()

	_, recvErr := io.Copy(stdout, conn)

	// The remote side has nothing more to send, so the relayed stream is
	// over. The copy from stdin may still be blocked reading stdin, and a
	// blocked read of a pipe or console cannot be interrupted portably, so
	// waiting for it could hang until the caller closes stdin, which may be
	// never (Kubernetes' wincat hangs there, and containerd keeps the port
	// forward open until wincat exits). Take its result only if it is in;
	// if not, the goroutine ends at stdin's next read or EOF, with conn closed.
	var sendErr error
	select {
	case sendErr = <-sent:
	default:
	}
	if !stop() && (recvErr != nil || sendErr != nil) {
		// ctx ended the relay; the copy errors are just "use of closed
		// network connection".
		return fmt.Errorf("relay cancelled: %w", context.Cause(ctx))
	}
	if sendErr != nil {
		return fmt.Errorf("copy stdin to socket: %w", sendErr)
	}
	if recvErr != nil {
		return fmt.Errorf("copy socket to stdout: %w", recvErr)
	}
	return nil
}

// send copies stdin to conn, then half-closes conn.
func send(conn net.Conn, stdin io.Reader) error {
	if _, err := io.Copy(conn, stdin); err != nil {
		return err
	}
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// abort closes conn with a reset, so that the remote side sees an error
// rather than the end of a complete stream.
func abort(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}
