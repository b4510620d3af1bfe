// Package containerdconn sets up the project's gRPC client connections to
// containerd and to the proxy plugins it serves.
package containerdconn

import (
	"fmt"

	"github.com/containerd/containerd/v2/pkg/dialer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Target is the gRPC target for address (a unix socket path or address on
// Linux, a named pipe on Windows). grpc.NewClient resolves a target
// without a registered scheme with DNS; there is no resolver for npipe://,
// so on Windows the dialer would never be called ("produced zero
// addresses"). passthrough hands the address to the dialer unchanged.
// containerd's client package gets the same effect by setting grpc's
// default scheme to passthrough on Windows (containerd v2.4.2
// client/client.go, init); code that does not link that package must say so
// in the target.
func Target(address string) string {
	return "passthrough:///" + dialer.DialAddress(address)
}

// Dial sets up an insecure connection to the gRPC server at address through
// containerd's dialer (unix sockets, or named pipes on Windows); it
// connects on first use. opts are added to the connection's options.
func Dial(address string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dialer.ContextDialer),
	}, opts...)
	conn, err := grpc.NewClient(Target(address), opts...)
	if err != nil {
		return nil, fmt.Errorf("set up gRPC connection to %s: %w", address, err)
	}
	return conn, nil
}
