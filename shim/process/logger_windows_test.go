//go:build windows

package process

import (
	"io"
	"os"

	"github.com/Microsoft/go-winio"
)

// loggerInputs are a logging binary's inputs as runhcs passes them: named
// pipes in CONTAINER_STDOUT and CONTAINER_STDERR, and CONTAINER_WAIT to
// close when ready.
func loggerInputs() (stdout, stderr io.Reader, ready io.Closer, err error) {
	var conns []io.ReadCloser
	for _, env := range []string{"CONTAINER_STDOUT", "CONTAINER_STDERR", "CONTAINER_WAIT"} {
		c, err := winio.DialPipe(os.Getenv(env), nil)
		if err != nil {
			return nil, nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns[0], conns[1], conns[2], nil
}
