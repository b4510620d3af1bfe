package task

import (
	"context"
	"testing"
	"time"

	"github.com/winproc/winproc/shim/compute/computetest"
)

// drainingBackend is a backend with background work that ends when
// release is closed.
type drainingBackend struct {
	*computetest.Backend
	release chan struct{}
}

func (b drainingBackend) Drain(ctx context.Context) error {
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestShutdownDrainsFirst checks that an idle shim stops only once its
// backend's background work has ended.
func TestShutdownDrainsFirst(t *testing.T) {
	b := drainingBackend{Backend: computetest.NewBackend(), release: make(chan struct{})}
	sd := &shutdownRecorder{}
	svc := New(b, &recorder{}, sd, nil)
	stopped := func() bool {
		sd.mu.Lock()
		defer sd.mu.Unlock()
		return sd.done
	}
	svc.ShutdownIfIdle()
	svc.ShutdownIfIdle() // a second ask while draining changes nothing
	time.Sleep(100 * time.Millisecond)
	if stopped() {
		t.Fatal("the shim stopped with its backend's background work pending")
	}
	close(b.release)
	deadline := time.Now().Add(5 * time.Second)
	for !stopped() {
		if time.Now().After(deadline) {
			t.Fatal("the shim did not stop once the background work ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
