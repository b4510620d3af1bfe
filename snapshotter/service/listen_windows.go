//go:build windows

package service

import (
	"net"

	"github.com/Microsoft/go-winio"
)

// pipeSDDL lets only Administrators (BA) and SYSTEM (SY) open the pipe: it
// hands out layers of every image on the node.
const pipeSDDL = "D:P(A;;GA;;;BA)(A;;GA;;;SY)"

func listen(address string) (net.Listener, error) {
	return winio.ListenPipe(address, &winio.PipeConfig{SecurityDescriptor: pipeSDDL})
}
