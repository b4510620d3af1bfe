package backend

import (
	"context"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/compute/computetest"
)

func TestRouter(t *testing.T) {
	silos, hostProcess := computetest.NewBackend(), computetest.NewBackend()
	r := router{silos: silos, hostProcess: hostProcess}
	ctx := context.Background()
	if _, err := r.Create(ctx, "silo", &compute.Settings{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Create(ctx, "agent", &compute.Settings{HostProcess: &compute.HostProcess{}}); err != nil {
		t.Fatal(err)
	}
	if silos.System("silo") == nil || hostProcess.System("agent") == nil || silos.System("agent") != nil || hostProcess.System("silo") != nil {
		t.Fatal("a system went to the wrong backend")
	}
	for id, want := range map[string]string{"silo": "silo", "agent": "agent"} {
		sys, err := r.Open(ctx, id)
		if err != nil || sys.ID() != want {
			t.Errorf("Open(%s) = %v, %v", id, sys, err)
		}
	}
	if _, err := r.Open(ctx, "none"); !errdefs.IsNotFound(err) {
		t.Errorf("Open of a system neither has = %v", err)
	}
}
