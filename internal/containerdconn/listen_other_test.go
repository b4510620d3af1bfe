//go:build !windows

package containerdconn

import (
	"net"
	"path/filepath"
	"testing"
)

// listen listens on a unix socket, as containerd does on Linux.
func listen(t *testing.T) (string, net.Listener) {
	t.Helper()
	address := filepath.Join(t.TempDir(), "grpc.sock")
	l, err := net.Listen("unix", address)
	if err != nil {
		t.Fatal(err)
	}
	return address, l
}
