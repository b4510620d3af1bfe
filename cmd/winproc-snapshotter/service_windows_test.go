//go:build windows

package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/windows/svc"
)

func TestServiceStops(t *testing.T) {
	stopped := make(chan struct{})
	h := &handler{serve: func(ctx context.Context) error {
		<-ctx.Done()
		close(stopped)
		return nil
	}}
	requests := make(chan svc.ChangeRequest)
	status := make(chan svc.Status, 8)
	exited := make(chan uint32, 1)
	go func() {
		_, code := h.Execute(nil, requests, status)
		exited <- code
	}()
	if s := <-status; s.State != svc.StartPending {
		t.Fatalf("first state %v, want StartPending", s.State)
	}
	if s := <-status; s.State != svc.Running || s.Accepts&svc.AcceptStop == 0 || s.Accepts&svc.AcceptShutdown == 0 {
		t.Fatalf("second status %+v, want Running accepting Stop and Shutdown", s)
	}
	requests <- svc.ChangeRequest{Cmd: svc.Stop}
	if s := <-status; s.State != svc.StopPending {
		t.Fatalf("after Stop %v, want StopPending", s.State)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end serving")
	}
	if code := <-exited; code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

func TestServiceReportsFailure(t *testing.T) {
	h := &handler{serve: func(context.Context) error { return errors.New("root is not on NTFS") }}
	status := make(chan svc.Status, 8)
	if specific, code := h.Execute(nil, make(chan svc.ChangeRequest), status); !specific || code != 1 {
		t.Errorf("failed serve: exit (%v, %d), want a service-specific 1", specific, code)
	}
	if h.err == nil {
		t.Error("the failure was not kept for the caller")
	}
}
