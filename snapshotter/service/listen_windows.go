//go:build windows

package service

import (
	"net"
	"os"

	"github.com/Microsoft/go-winio"
)

// pipeSDDL lets only Administrators (BA) and SYSTEM (SY) open the pipe: it
// hands out layers of every image on the node.
const pipeSDDL = "D:P(A;;GA;;;BA)(A;;GA;;;SY)"

func listen(address string) (net.Listener, error) {
	l, err := winio.ListenPipe(address, &winio.PipeConfig{SecurityDescriptor: pipeSDDL})
	if err != nil {
		return nil, err
	}
	// Wine 8 hands the first client of a ListenPipe pipe to its
	// placeholder instance, where containerd's first connection fails; a
	// stat uses that up. On Windows the placeholder refuses clients and the
	// stat just fails (as in shim/process, listenOnce).
	os.Stat(address)
	return l, nil
}
