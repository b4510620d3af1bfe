//go:build !windows

package doctor

import (
	"context"
	"net"
	"strings"
)

// dial connects to a unix socket, as containerd dials its proxy plugins.
func dial(ctx context.Context, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", strings.TrimPrefix(address, "unix://"))
}
