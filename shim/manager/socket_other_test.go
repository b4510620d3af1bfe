//go:build !windows

package manager

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/shim"
)

// The socket of a shim: removed by the shim's shutdown callback, and by
// `delete` once no shim serves on it; kept while one does.
func TestSocketCleanup(t *testing.T) {
	ctx := namespaces.WithNamespace(context.Background(), "k8s.io")
	dir := t.TempDir()
	const containerd = "/run/containerd/containerd.sock"
	address, err := shim.CreateSocketAddress(ctx, dir, containerd, "pod1", false)
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(address, "unix://")
	listen := func() net.Listener {
		t.Helper()
		l, err := shim.NewSocket(address)
		if err != nil {
			t.Fatal(err)
		}
		// As a shim's: the file outlives the listener.
		l.SetUnlinkOnClose(false)
		return l
	}

	// A live shim's socket is kept; once it is gone, delete removes it.
	l := listen()
	if err := removeStaleSocket(ctx, dir, containerd, "pod1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("delete removed a live shim's socket: %v", err)
	}
	l.Close()
	if err := removeStaleSocket(ctx, dir, containerd, "pod1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("delete left a dead shim's socket: %v", err)
	}
	if err := removeStaleSocket(ctx, dir, containerd, "pod1"); err != nil {
		t.Errorf("delete with no socket: %v", err)
	}

	// The shim's own shutdown callback, from what start gave it.
	t.Setenv(SocketEnv, "")
	if SocketCleanup() != nil {
		t.Error("a cleanup with no socket")
	}
	listen().Close()
	t.Setenv(SocketEnv, address)
	cleanup := SocketCleanup()
	if err := cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the shutdown callback left the socket: %v", err)
	}
	if err := cleanup(ctx); err != nil {
		t.Errorf("a second cleanup: %v", err)
	}
}
