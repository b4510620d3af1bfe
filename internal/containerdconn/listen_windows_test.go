//go:build windows

package containerdconn

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	"github.com/containerd/containerd/v2/pkg/dialer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// listen listens on a named pipe, as containerd does on Windows, and
// returns its address in the npipe:// form containerd's shims and
// plugins are given.
func listen(t *testing.T) (string, net.Listener) {
	t.Helper()
	path := fmt.Sprintf(`\\.\pipe\winproc-containerdconn-test-%d`, time.Now().UnixNano())
	l, err := winio.ListenPipe(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Wine 8 hands the first client of a ListenPipe pipe to its placeholder
	// instance, where it hangs; a stat uses that up (on Windows it fails
	// and does nothing).
	os.Stat(path)
	return "npipe://" + strings.ReplaceAll(path, `\`, "/"), l
}

// TestDNSTargetNeverDials is the connection as the shim and doctor made
// it before: without passthrough, grpc resolves the npipe address with
// DNS and never calls the dialer.
func TestDNSTargetNeverDials(t *testing.T) {
	address, l := listen(t)
	serveHealth(t, l)
	var dialed atomic.Bool
	conn, err := grpc.NewClient(dialer.DialAddress(address),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			dialed.Store(true)
			return dialer.ContextDialer(ctx, a)
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = checkHealth(conn)
	if err == nil || dialed.Load() {
		t.Fatalf("health check without passthrough: err %v, dialer called %v; want a resolver error and no dial", err, dialed.Load())
	}
	t.Logf("without passthrough: %v", err)
}
