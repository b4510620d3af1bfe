package compute_test

import (
	"context"
	"testing"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/compute/computetest"
)

// Teardown terminates and closes what is left; a system not there is no
// error.
func TestTeardown(t *testing.T) {
	ctx := context.Background()
	b := computetest.NewBackend()
	if _, err := b.Create(ctx, "left", &compute.Settings{}); err != nil {
		t.Fatal(err)
	}
	if err := compute.Teardown(ctx, b, "left"); err != nil {
		t.Fatal(err)
	}
	if s := b.System("left"); !s.Terminated || !s.Closed {
		t.Errorf("after Teardown: terminated %v, closed %v", s.Terminated, s.Closed)
	}
	if err := compute.Teardown(ctx, b, "missing"); err != nil {
		t.Errorf("Teardown of a missing system: %v", err)
	}
}
