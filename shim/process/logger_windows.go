//go:build windows

package process

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/Microsoft/go-winio"
)

// readySignal is how a logging binary says it is ready.
const readySignal = "the CONTAINER_WAIT pipe"

// loggerPipeSeq keeps the pipe names of two loggers of one id apart.
var loggerPipeSeq atomic.Uint64

// newLoggerPipes makes the named pipes of runhcs's NewBinaryIO (hcsshim
// internal/cmd/io_binary.go): the binary finds them in CONTAINER_STDOUT,
// CONTAINER_STDERR and CONTAINER_WAIT, dials them, and closes the wait
// pipe once it is ready.
func newLoggerPipes(id string) (*loggerPipes, error) {
	base := fmt.Sprintf(`\\.\pipe\winproc-log-%s-%d-%d`, id, os.Getpid(), loggerPipeSeq.Add(1))
	var pipes []*acceptedPipe
	closeAll := func() {
		for _, p := range pipes {
			p.Close()
		}
	}
	for _, name := range []string{"stdout", "stderr", "wait"} {
		p, err := listenOnce(base + "-" + name)
		if err != nil {
			closeAll()
			return nil, err
		}
		pipes = append(pipes, p)
	}
	return &loggerPipes{
		stdout: pipes[0],
		stderr: pipes[1],
		ready:  pipes[2],
		env: []string{
			"CONTAINER_STDOUT=" + pipes[0].path,
			"CONTAINER_STDERR=" + pipes[1].path,
			"CONTAINER_WAIT=" + pipes[2].path,
		},
		started: func() {},
		close:   closeAll,
	}, nil
}

// acceptedPipe is the server end of a named pipe that takes one client;
// reads and writes wait for it to connect.
type acceptedPipe struct {
	path     string
	l        net.Listener
	accepted chan struct{}
	conn     net.Conn
	err      error
}

func listenOnce(path string) (*acceptedPipe, error) {
	l, err := winio.ListenPipe(path, nil)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Wine 8 hands the first client of a ListenPipe pipe to its
	// placeholder instance, where it hangs; a stat uses that up. On
	// Windows the placeholder refuses clients and the stat just fails.
	os.Stat(path)
	p := &acceptedPipe{path: path, l: l, accepted: make(chan struct{})}
	go func() {
		defer close(p.accepted)
		p.conn, p.err = l.Accept()
	}()
	return p, nil
}

func (p *acceptedPipe) Read(b []byte) (int, error) {
	<-p.accepted
	if p.err != nil {
		return 0, fmt.Errorf("%s: no client: %w", p.path, p.err)
	}
	return p.conn.Read(b)
}

func (p *acceptedPipe) Write(b []byte) (int, error) {
	<-p.accepted
	if p.err != nil {
		return 0, fmt.Errorf("%s: no client: %w", p.path, p.err)
	}
	return p.conn.Write(b)
}

// Close stops waiting for a client and closes the connection.
func (p *acceptedPipe) Close() error {
	p.l.Close()
	<-p.accepted
	if p.conn != nil {
		return p.conn.Close()
	}
	return nil
}
