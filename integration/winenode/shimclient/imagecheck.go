//go:build windows

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/containerd/containerd/v2/pkg/namespaces"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/shim/imagecheck"
	"github.com/winproc/winproc/winbuild"
)

// imageCheckTimes prints first=, connected= and then= in milliseconds.
func imageCheckTimes(address, ns, id, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		return fmt.Errorf("want a positive count, got %q", count)
	}
	ctx, cancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), time.Minute)
	defer cancel()
	host, err := winbuild.Host()
	if err != nil {
		return err
	}
	check := func(conn *grpc.ClientConn) (time.Duration, error) {
		start := time.Now()
		err := imagecheck.Check(ctx, imagecheck.RemoteStores(conn), host, id)
		return time.Since(start), err
	}
	lazy, err := containerdconn.Dial(address)
	if err != nil {
		return err
	}
	defer lazy.Close()
	first, err := check(lazy)
	if err != nil {
		return err
	}
	ready, err := containerdconn.Dial(address)
	if err != nil {
		return err
	}
	defer ready.Close()
	ready.Connect()
	for s := ready.GetState(); s != connectivity.Ready; s = ready.GetState() {
		if !ready.WaitForStateChange(ctx, s) {
			return fmt.Errorf("connect to %s: %w", address, ctx.Err())
		}
	}
	connected, err := check(ready)
	if err != nil {
		return err
	}
	var then []time.Duration
	for range n {
		d, err := check(ready)
		if err != nil {
			return err
		}
		then = append(then, d)
	}
	slices.Sort(then)
	fmt.Printf("first=%.1f connected=%.1f then=%.1f\n", ms(first), ms(connected), ms(then[len(then)/2]))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
