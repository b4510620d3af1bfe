//go:build windows

package doctor

import (
	"context"
	"net"
	"path/filepath"
	"strings"

	"github.com/Microsoft/go-winio"
)

// dial connects to a named pipe, as containerd dials its proxy plugins on
// Windows.
func dial(ctx context.Context, address string) (net.Conn, error) {
	address = filepath.FromSlash(strings.TrimPrefix(filepath.ToSlash(address), "npipe://"))
	return winio.DialPipeContext(ctx, address)
}
