//go:build linux

package emulation

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/internal/cgfreezer"
	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// closeBound is how long Close may take while a fault holds: its wait for
// the processes (2 s), its teardown attempt (3 s), and a second of slack.
const closeBound = 6 * time.Second

// siloFault is a fault made from outside the shim on a running silo; apply
// returns what clears it.
type siloFault struct {
	name string
	// v1Freezer marks a fault that needs the cgroup v1 freezer.
	v1Freezer bool
	// pending is whether the teardown is left to the background while
	// the fault holds.
	pending bool
	apply   func(t *testing.T, sys *system) (clear func())
}

var siloFaults = []siloFault{
	{name: "frozen silo", v1Freezer: true, pending: true, apply: freezeSilo},
	{name: "dead wineserver", apply: killServer},
	{name: "busy mount", apply: holdDriveC},
	{name: "held cgroup", v1Freezer: true, pending: true, apply: holdCgroup},
}

// freezeSilo freezes every process of the silo: they take SIGKILL only at
// the thaw.
func freezeSilo(t *testing.T, sys *system) func() {
	procs, err := sys.processes()
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.pid)
	}
	return cgfreezer.Frozen(t, "winproc-test-"+sys.id, pids...)
}

// killServer SIGKILLs the silo's wineserver; there is nothing to clear.
func killServer(t *testing.T, sys *system) func() {
	if err := unix.Kill(sys.st.ServerPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return func() {}
}

// holdDriveC starts a process outside the silo with its working directory
// in the silo's C:, which keeps that overlay busy.
func holdDriveC(t *testing.T, sys *system) func() {
	_, stop := cgfreezer.Sleeper(t, sys.cdir)
	return stop
}

// holdCgroup makes a cgroup inside the silo's and leaves a frozen process
// in it.
func holdCgroup(t *testing.T, sys *system) func() {
	if sys.st.Cgroup == "" {
		t.Skip("no cgroup v2 hierarchy for silos")
	}
	return cgfreezer.HeldCgroup(t, sys.st.Cgroup)
}

// idleSilo starts silo id of the basic layers with pause.exe in it, idle;
// the process is closed when the test ends.
func (f *fixture) idleSilo(t *testing.T, id string) (*system, compute.Process) {
	t.Helper()
	sys := f.start(t, id, &compute.Settings{Layers: f.basicLayers(t)}).(*system)
	var out syncbuffer.Buffer
	p, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `C:\pause.exe`, Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	waitIdle(t, int(p.Pid()))
	return sys, p
}

// TestSiloFaults runs each fault on a real silo with a process in it:
// Close returns within its bound while the fault holds; once it clears,
// the teardown carried on in the background finishes, Drain waits for it,
// and nothing of the system is left; a second Close or Remove is harmless.
func TestSiloFaults(t *testing.T) {
	f := newFixture(t)
	_, v1err := cgfreezer.Mount()
	for i, fault := range siloFaults {
		t.Run(fault.name, func(t *testing.T) {
			if fault.v1Freezer && v1err != nil {
				t.Skip(v1err)
			}
			id := "fault-" + strconv.Itoa(i)
			sys, _ := f.idleSilo(t, id)
			dir, cgroup := sys.dir, sys.st.Cgroup

			clear := fault.apply(t, sys)
			if err := sys.Terminate(context.Background()); err != nil && !errdefs.IsNotFound(err) {
				t.Fatalf("terminate: %v", err)
			}
			start := time.Now()
			if err := sys.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if d := time.Since(start); d > closeBound {
				t.Errorf("Close took %v while the fault held, want at most %v", d, closeBound)
			}
			checkPending(t, f.b.root, id, fault.pending)

			clear()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := f.b.Drain(ctx); err != nil {
				t.Fatalf("drain: %v", err)
			}
			f.checkGone(t, id)
			if cgroup != "" {
				if _, err := os.Stat(cgroup); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the silo's cgroup %s is left (%v)", cgroup, err)
				}
			}
			if mps := mountsBelow(t, dir); len(mps) > 0 {
				t.Errorf("mounts left: %v", mps)
			}
			if err := sys.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if err := f.b.Remove(context.Background(), id); err != nil {
				t.Errorf("Remove after the teardown: %v", err)
			}
		})
	}
}

// checkPending checks whether the teardown of id is recorded as pending.
func checkPending(t *testing.T, root, id string, want bool) {
	t.Helper()
	pending, err := PendingTeardowns(root)
	if err != nil {
		t.Fatal(err)
	}
	got := false
	for _, p := range pending {
		if p.ID == id {
			got = true
			if p.Attempts < 1 || p.LastError == "" || p.Since.IsZero() {
				t.Errorf("pending teardown %+v: want attempts, an error and a time", p)
			}
		}
	}
	if got != want {
		t.Errorf("teardown of %s pending: %v, want %v (%+v)", id, got, want, pending)
	}
}

// A killed process that cannot end (its cgroup frozen) has its exit
// reported by exitGrace, and so has its terminated system its stop: a stop
// waiting for either returns in the kubelet's deadline, and the system's
// teardown ends them once it can.
func TestKilledFrozenProcessExits(t *testing.T) {
	if _, err := cgfreezer.Mount(); err != nil {
		t.Skip(err)
	}
	f := newFixture(t)
	sys, p := f.idleSilo(t, "frozen-kill")
	clear := freezeSilo(t, sys)
	start := time.Now()
	if err := p.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Wait():
	case <-time.After(exitGrace + 5*time.Second):
		t.Fatalf("the killed frozen process's exit did not come in %v", exitGrace+5*time.Second)
	}
	if d := time.Since(start); d < exitGrace {
		t.Errorf("the exit came after %v, before the grace %v: the process could not have ended", d, exitGrace)
	}
	if code, err := p.ExitCode(); code != 1 || err != nil {
		t.Errorf("ExitCode = %d, %v; want 1, a terminated process's", code, err)
	}
	// The system, terminated, is reported stopped by exitGrace too.
	if err := sys.Terminate(context.Background()); err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	select {
	case <-sys.Wait():
	case <-time.After(exitGrace + 5*time.Second):
		t.Fatalf("the terminated frozen system's stop did not come in %v", exitGrace+5*time.Second)
	}
	// Its teardown goes to the background at once: nothing would end it.
	closing := time.Now()
	if err := sys.Close(); err != nil {
		t.Error(err)
	}
	if d := time.Since(closing); d > time.Second {
		t.Errorf("Close of the stuck system took %v", d)
	}
	checkPending(t, f.b.root, "frozen-kill", true)
	clear()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.b.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	f.checkGone(t, "frozen-kill")
}
