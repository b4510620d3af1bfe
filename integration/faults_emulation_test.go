//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/cgfreezer"
	"github.com/winproc/winproc/internal/procscan"
	"github.com/winproc/winproc/shim/emulation"
)

// emulationFault is a fault of the emulation made from outside the shim
// on one silo, the compute system in dir (Root/<id>); apply returns what
// clears it.
type emulationFault struct {
	name string
	// v1Freezer marks a fault that needs the cgroup v1 freezer.
	v1Freezer bool
	apply     func(t *testing.T, dir string) (clear func())
}

var emulationFaults = []emulationFault{
	{name: "frozen silo", v1Freezer: true, apply: freezeSiloIn},
	{name: "dead wineserver", apply: killWineserverIn},
	{name: "busy mount", apply: holdDriveCIn},
	{name: "held cgroup", v1Freezer: true, apply: holdCgroupIn},
}

// siloPIDs lists the processes of the silo in dir, by its cgroup.
func siloPIDs(t *testing.T, dir string) []int {
	t.Helper()
	cg := emulation.SiloCgroup(dir)
	if cg == "" {
		t.Skip("no cgroup v2 hierarchy for silos")
	}
	b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// freezeSiloIn freezes every process of the silo: they take SIGKILL only
// at the thaw.
func freezeSiloIn(t *testing.T, dir string) func() {
	return cgfreezer.Frozen(t, "winproc-fault-"+filepath.Base(dir), siloPIDs(t, dir)...)
}

// killWineserverIn SIGKILLs the silo's wineserver.
func killWineserverIn(t *testing.T, dir string) func() {
	for _, pid := range siloPIDs(t, dir) {
		if strings.HasPrefix(procscan.Comm(pid), "wineserver") {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}
	}
	t.Fatalf("no wineserver in the silo %s", dir)
	return nil
}

// holdDriveCIn keeps the silo's drive C: busy with a process outside the
// silo whose working directory is there.
func holdDriveCIn(t *testing.T, dir string) func() {
	_, stop := cgfreezer.Sleeper(t, filepath.Join(dir, "c"))
	return stop
}

// holdCgroupIn makes a cgroup inside the silo's, with a frozen process in
// it.
func holdCgroupIn(t *testing.T, dir string) func() {
	siloPIDs(t, dir) // skips without a silo cgroup
	return cgfreezer.HeldCgroup(t, emulation.SiloCgroup(dir))
}

// emulationFault starts f.count serving pods, applies fault to each pod's
// silos (the pod's and its app's), stops and removes every pod while the
// fault holds, clears it, retries what failed, and checks that nothing of
// the pods is left.
func (f *faultRun) emulationFault(t *testing.T, fault emulationFault) {
	row := faultRow{fault: "emulation: " + fault.name, pods: f.count}
	defer func() { f.table.add(row) }()
	if fault.v1Freezer {
		if _, err := cgfreezer.Mount(); err != nil {
			t.Skip(err)
		}
	}
	slug := strings.ReplaceAll(fault.name, " ", "-")
	var removals []*podRemoval
	for i := range f.count {
		removals = append(removals, &podRemoval{pod: startServingPod(t, f.n, f.client, fmt.Sprintf("%s-%d", slug, i))})
	}
	var clears []func()
	for _, r := range removals {
		for _, id := range []string{r.pod.id, r.pod.name + "-app"} {
			clears = append(clears, fault.apply(t, filepath.Join(f.n.EmulationRoot(), id)))
		}
	}
	ctx := context.Background()
	for _, r := range removals {
		if r.run(ctx, f.n, &row) {
			row.removed++
		} else {
			t.Logf("pod %s while the fault held: %v", r.pod.name, r.err)
		}
	}
	for _, clear := range clears {
		clear()
	}
	retryUntil := time.Now().Add(2 * time.Minute)
	for _, r := range removals {
		for !r.run(ctx, f.n, &row) && time.Now().Before(retryUntil) {
			time.Sleep(time.Second)
		}
		if r.err != nil {
			t.Errorf("pod %s not removed after the fault cleared: %v", r.pod.name, r.err)
		}
	}
	for _, r := range removals {
		for _, id := range []string{r.pod.name + "-app", r.pod.id} {
			requireNoLeaksWithin(t, f.n, id, time.Minute)
			row.left = append(row.left, f.n.Leaks(id)...)
		}
	}
	t.Logf("%s: %d of %d calls in deadline, %d of %d pods removed while the fault held", fault.name, row.inDeadline, row.calls, row.removed, row.pods)
	if row.inDeadline != row.calls {
		t.Errorf("%d of %d calls returned past their deadline of %v", row.calls-row.inDeadline, row.calls, callDeadline)
	}
}

// podRemoval is the removal of a serving pod, step by step: its app
// killed and deleted through containerd, then the pod stopped and
// removed through crictl. A step that failed is retried by the next run.
type podRemoval struct {
	pod  *servingPod
	done int
	err  error
}

// run runs the steps not yet done, each one call within callDeadline
// counted in row, until one fails; it reports whether all are done.
func (r *podRemoval) run(ctx context.Context, n *node.Node, row *faultRow) bool {
	p := r.pod
	steps := []func(ctx context.Context) error{
		func(ctx context.Context) error {
			exited, err := p.task.Wait(ctx)
			if err != nil {
				return ignoreNotFound(err)
			}
			if err := p.task.Kill(ctx, syscall.SIGKILL); err != nil && !errdefs.IsNotFound(err) {
				return err
			}
			select {
			case <-exited:
				return nil
			case <-ctx.Done():
				return fmt.Errorf("the app of %s did not exit after SIGKILL: %w", p.name, ctx.Err())
			}
		},
		func(ctx context.Context) error { _, err := p.task.Delete(ctx); return ignoreNotFound(err) },
		func(ctx context.Context) error {
			return ignoreNotFound(p.c.Delete(ctx, containerd.WithSnapshotCleanup))
		},
		func(ctx context.Context) error { _, err := n.Crictl(ctx, "stopp", p.id); return err },
		func(ctx context.Context) error { _, err := n.Crictl(ctx, "rmp", p.id); return err },
	}
	names := []string{"kill the app", "delete the app's task", "delete the app's container", "crictl stopp", "crictl rmp"}
	for r.done < len(steps) {
		start := time.Now()
		if err := row.call(ctx, steps[r.done]); err != nil {
			r.err = fmt.Errorf("%s (after %v): %w", names[r.done], time.Since(start).Round(time.Millisecond), err)
			return false
		}
		r.done++
	}
	r.err = nil
	return true
}

func ignoreNotFound(err error) error {
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}
