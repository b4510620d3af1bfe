//go:build !windows

package manager

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/containerd/containerd/v2/pkg/shim"
	"github.com/containerd/log"
)

// SocketEnv passes a new shim the address of the socket `start` made for
// it. pkg/shim's own cleanup finds the socket through the bundle the shim
// started in (its socket directory link), which containerd has already
// removed when the shim of a shim-mode pod ends: the socket file was left
// in containerd's shim socket directory.
const SocketEnv = "WINPROC_SHIM_SOCKET"

// SocketCleanup is the shutdown callback that removes the shim's socket
// file, as runc's shim does (RemoveSocket on shutdown); nil when `start`
// gave the shim no socket.
func SocketCleanup() func(context.Context) error {
	address := os.Getenv(SocketEnv)
	if address == "" {
		return nil
	}
	return func(context.Context) error {
		if err := shim.RemoveSocket(address); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove the shim's socket %s: %w", address, err)
		}
		return nil
	}
}

// removeDeadSocket is `delete`'s part, as runc's manager's: the socket of a
// shim that died, found as `start` made it (the socket directory link
// pkg/shim's start leaves in the bundle, the -address flag, the pod's
// grouping), is removed unless a shim still serves on it (the pod's other
// tasks). A bundle without the link has nothing to remove.
func removeDeadSocket(ctx context.Context, id string) error {
	dir, err := os.Readlink(socketDirLink)
	if err != nil {
		return nil
	}
	f := flag.Lookup("address")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	grouping, err := group(id)
	if err != nil {
		return err
	}
	return removeStaleSocket(ctx, dir, f.Value.String(), grouping)
}

// removeStaleSocket removes the socket `start` makes in dir for the pod
// grouping of the containerd at containerdAddress, unless a shim serves
// on it.
func removeStaleSocket(ctx context.Context, dir, containerdAddress, grouping string) error {
	address, err := shim.CreateSocketAddress(ctx, dir, containerdAddress, grouping, false)
	if err != nil {
		return err
	}
	if shim.CanConnect(address) {
		return nil
	}
	if err := shim.RemoveSocket(address); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the dead shim's socket %s: %w", address, err)
	}
	log.G(ctx).WithField("socket", address).Debug("removed a dead shim's socket")
	return nil
}

// socketDirLink is the link to the socket directory pkg/shim's `start`
// writes in the bundle (pkg/shim/util_unix.go, socketDirLink).
const socketDirLink = "s"
