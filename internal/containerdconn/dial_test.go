package containerdconn

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// serveHealth serves gRPC's health service on l until the test ends.
func serveHealth(t *testing.T, l net.Listener) {
	t.Helper()
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
}

func checkHealth(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

func TestDialReachesServer(t *testing.T) {
	address, l := listen(t)
	serveHealth(t, l)
	conn, err := Dial(address)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := checkHealth(conn); err != nil {
		t.Fatalf("health check over %s: %v", Target(address), err)
	}
}
