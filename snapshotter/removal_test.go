package snapshotter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
)

// The layer driver's refusals as Windows gives them: access denied, and a
// layer still activated or mounted (layerErr marks it in use).
var (
	denied = fmt.Errorf("the layer driver refused: %w", os.ErrPermission)
	inUse  = fmt.Errorf("the process cannot access the file because it is being used by another process: %w", errLayerInUse)
)

// layerRootEnv names the snapshotter root TestLayerDriverUnderWine (Linux)
// prepares for TestLayerDriverFaults (Windows, under Wine).
const layerRootEnv = "WINPROC_LAYER_ROOT"

// testSweep sweeps soon enough for a test, but not before the test has
// looked at what Remove left.
var testSweep = sweepTimes{first: 200 * time.Millisecond, max: 400 * time.Millisecond}

// waitEntries waits until snapshots/ holds want, for 10 s at most.
func waitEntries(t *testing.T, root string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := entries(t, filepath.Join(root, "snapshots"))
		if reflect.DeepEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots/ holds %v 10 s on, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Remove never fails on a layer the driver refuses: the snapshot leaves the
// metadata at once, and its directory (renamed to rm-<id>, or under its own
// name when the rename is refused) is destroyed now or by the sweep once
// released. A refusal deactivates the layer and retries, as containerd's
// windows snapshotter does.
func TestRemoveLayerFaults(t *testing.T) {
	tests := []struct {
		name      string
		fail      map[string][]error
		wantCalls []string
		// wantLeft is what Remove leaves for the sweep besides the base.
		wantLeft []string
		// release clears the faults before the sweep; otherwise they end
		// by themselves.
		release bool
	}{
		{
			name:      "no fault",
			wantCalls: []string{"rename 2 rm-2", "destroy rm-2"},
		},
		{
			name:      "access denied on rename, once",
			fail:      map[string][]error{"rename 2 rm-2": {denied, nil}},
			wantCalls: []string{"rename 2 rm-2", "deactivate 2", "rename 2 rm-2", "destroy rm-2"},
		},
		{
			name:      "access denied on rename, persistently",
			fail:      map[string][]error{"rename 2 rm-2": {denied}},
			wantCalls: []string{"rename 2 rm-2", "deactivate 2", "rename 2 rm-2", "destroy 2"},
		},
		{
			name:      "access denied on rename and destroy, persistently",
			fail:      map[string][]error{"rename 2 rm-2": {denied}, "destroy 2": {denied}},
			wantCalls: []string{"rename 2 rm-2", "deactivate 2", "rename 2 rm-2", "destroy 2", "deactivate 2", "destroy 2"},
			wantLeft:  []string{"2"},
			release:   true,
		},
		{
			name:      "access denied on destroy, once",
			fail:      map[string][]error{"destroy rm-2": {denied, nil}},
			wantCalls: []string{"rename 2 rm-2", "destroy rm-2", "deactivate rm-2", "destroy rm-2"},
		},
		{
			name:      "access denied on destroy, persistently",
			fail:      map[string][]error{"destroy rm-2": {denied}},
			wantCalls: []string{"rename 2 rm-2", "destroy rm-2", "deactivate rm-2", "destroy rm-2"},
			wantLeft:  []string{"rm-2"},
			release:   true,
		},
		{
			name:      "layer activated, released by the deactivation",
			fail:      map[string][]error{"rename 2 rm-2": {inUse, nil}},
			wantCalls: []string{"rename 2 rm-2", "deactivate 2", "rename 2 rm-2", "destroy rm-2"},
		},
		{
			name:      "layer activated, deactivation refused",
			fail:      map[string][]error{"rename 2 rm-2": {inUse}, "deactivate 2": {errors.New("the device is not ready")}, "destroy 2": {inUse}},
			wantCalls: []string{"rename 2 rm-2", "deactivate 2", "rename 2 rm-2", "destroy 2", "deactivate 2", "destroy 2"},
			wantLeft:  []string{"2"},
			release:   true,
		},
		{
			name:      "in use, then released",
			fail:      map[string][]error{"destroy rm-2": {inUse, inUse, nil}},
			wantCalls: []string{"rename 2 rm-2", "destroy rm-2", "deactivate rm-2", "destroy rm-2"},
			wantLeft:  []string{"rm-2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			f := &fakeLayers{root: root}
			s := openWith(t, root, f, testSweep)
			ctx := context.Background()
			unpackLayer(t, ctx, s, "base", "", "a")
			must(s.Prepare(ctx, "scratch", "base"))
			f.reset(tc.fail)

			if err := s.Remove(ctx, "scratch"); err != nil {
				t.Fatalf("Remove: %v", err)
			}
			if got := f.callList(); !reflect.DeepEqual(got, tc.wantCalls) {
				t.Errorf("calls %q, want %q", got, tc.wantCalls)
			}
			if _, err := s.Stat(ctx, "scratch"); !errdefs.IsNotFound(err) {
				t.Errorf("Stat after Remove: %v, want NotFound", err)
			}
			if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, append([]string{"1"}, tc.wantLeft...)) {
				t.Errorf("snapshots/ holds %v after Remove, want the base and %v", got, tc.wantLeft)
			}
			if tc.release {
				f.reset(nil)
			}
			waitEntries(t, root, []string{"1"})
		})
	}
}

// A rename failing for a reason that is not the layer's (the volume gone)
// still fails Remove, as FailedPrecondition, and changes nothing.
func TestRemoveOtherRenameError(t *testing.T) {
	root := t.TempDir()
	f := &fakeLayers{root: root}
	s := openFake(t, root, f)
	ctx := context.Background()
	unpackLayer(t, ctx, s, "base", "", "a")
	must(s.Prepare(ctx, "scratch", "base"))
	f.reset(map[string][]error{"rename 2 rm-2": {errors.New("the network name is no longer available")}})

	err := s.Remove(ctx, "scratch")
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "scratch") {
		t.Fatalf("Remove: %v, want FailedPrecondition naming the snapshot", err)
	}
	if _, err := s.Stat(ctx, "scratch"); err != nil {
		t.Errorf("Stat after a failed Remove: %v", err)
	}
	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Errorf("snapshots/ holds %v after a failed Remove, want [1 2]", got)
	}
}

// What a removal left when the snapshotter stopped is swept by the next
// one: at its start, or by its sweep when the layer is still held then.
func TestRestartSweepsLeftovers(t *testing.T) {
	root := t.TempDir()
	f := &fakeLayers{root: root}
	s := openFake(t, root, f)
	ctx := context.Background()
	unpackLayer(t, ctx, s, "base", "", "a")
	must(s.Prepare(ctx, "c1", "base"))
	must(s.Prepare(ctx, "c2", "base"))
	f.reset(map[string][]error{"destroy rm-2": {denied}, "rename 3 rm-3": {inUse}, "destroy 3": {inUse}})
	for _, key := range []string{"c1", "c2"} {
		if err := s.Remove(ctx, key); err != nil {
			t.Fatalf("Remove(%s): %v", key, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"1", "3", "rm-2"}) {
		t.Fatalf("snapshots/ holds %v after the removals, want [1 3 rm-2]", got)
	}

	// At the restart rm-2 can go, and 3 can be renamed, but is still in
	// use until later.
	f.reset(map[string][]error{"destroy rm-3": {inUse, inUse, inUse, inUse, nil}})
	openWith(t, root, f, testSweep)
	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{"1", "rm-3"}) {
		t.Errorf("snapshots/ holds %v after the restart, want [1 rm-3]", got)
	}
	waitEntries(t, root, []string{"1"})
}

// The sweep runs first after its first interval, then at doubling
// intervals up to its longest while something is left; a removal that
// leaves something starts it over, and stop ends it.
func TestSweepBacksOff(t *testing.T) {
	every := sweepTimes{first: 20 * time.Millisecond, max: 60 * time.Millisecond}
	times := make(chan time.Time, 16)
	left := 6
	sweep := func(context.Context) error {
		times <- time.Now()
		if left--; left > 0 {
			return errors.New("still held")
		}
		return nil
	}
	start := time.Now()
	w := startSweep(context.Background(), sweep, every, true)
	t.Cleanup(func() { w.stop() })
	want := []time.Duration{20, 40, 60, 60, 60, 60}
	prev := start
	for i, min := range want {
		var at time.Time
		select {
		case at = <-times:
		case <-time.After(5 * time.Second):
			t.Fatalf("sweep %d did not come", i+1)
		}
		gap := at.Sub(prev)
		// Timers do not fire early; a gap of twice the longest interval
		// is a back-off without its bound.
		if gap < min*time.Millisecond || (i >= 3 && gap >= 120*time.Millisecond) {
			t.Errorf("sweep %d came %v after the one before, want about %v", i+1, gap, min*time.Millisecond)
		}
		prev = at
	}
	select {
	case at := <-times:
		t.Fatalf("swept again %v after nothing was left", at.Sub(prev))
	case <-time.After(200 * time.Millisecond):
	}
	woken := time.Now()
	w.wake()
	select {
	case at := <-times:
		if gap := at.Sub(woken); gap < every.first || gap >= every.max {
			t.Errorf("woken sweep came after %v, want its first interval %v", gap, every.first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a wake did not sweep")
	}
	if err := w.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// Prepare and Commit cannot be deferred: a layer the driver refuses fails
// them with the class containerd acts on, naming the layer and the fix.
func TestPrepareCommitLayerFaults(t *testing.T) {
	tests := []struct {
		name, call string
		fault      error
		class      func(error) bool
		fix        string
	}{
		{"prepare, in use", "scratch 2", inUse, errdefs.IsFailedPrecondition, "stop the containers using it"},
		{"prepare, access denied", "scratch 2", denied, errdefs.IsPermissionDenied, "run the snapshotter as SYSTEM or root"},
		{"commit, in use", "commit 2", inUse, errdefs.IsFailedPrecondition, "stop the containers using it"},
		{"commit, access denied", "commit 2", denied, errdefs.IsPermissionDenied, "run the snapshotter as SYSTEM or root"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			f := &fakeLayers{root: root}
			s := openFake(t, root, f)
			ctx := context.Background()
			unpackLayer(t, ctx, s, "base", "", "a")
			f.reset(map[string][]error{tc.call: {tc.fault}})

			_, err := s.Prepare(ctx, "scratch", "base")
			if strings.HasPrefix(tc.call, "commit") {
				if err != nil {
					t.Fatalf("Prepare: %v", err)
				}
				err = s.Commit(ctx, "layer", "scratch")
			}
			if !tc.class(err) {
				t.Fatalf("%s: %v, want its class", tc.call, err)
			}
			layer := filepath.Join(root, "snapshots", "2")
			if !strings.Contains(err.Error(), layer) || !strings.Contains(err.Error(), tc.fix) {
				t.Errorf("error %q does not name the layer %s and the fix %q", err, layer, tc.fix)
			}
			if _, err := s.Stat(ctx, "layer"); !errdefs.IsNotFound(err) {
				t.Errorf("Stat of the failed commit: %v, want NotFound", err)
			}
		})
	}
}

// stop ends the sweep; a sweep in a layer call that does not return keeps
// stop waiting only its bound.
func TestSweepStop(t *testing.T) {
	for _, hangs := range []bool{false, true} {
		t.Run(fmt.Sprintf("hangs=%v", hangs), func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			entered := make(chan struct{})
			sweep := func(ctx context.Context) error {
				close(entered)
				if hangs {
					<-release
				} else {
					<-ctx.Done()
				}
				return ctx.Err()
			}
			w := startSweep(context.Background(), sweep, sweepTimes{first: time.Millisecond, max: time.Millisecond}, true)
			w.closeWait = 300 * time.Millisecond
			<-entered
			start := time.Now()
			err := w.stop()
			took := time.Since(start)
			if hangs && (err == nil || took < w.closeWait) {
				t.Errorf("stop with a hanging sweep: %v after %v, want an error after %v", err, took, w.closeWait)
			}
			if !hangs && (err != nil || took >= w.closeWait) {
				t.Errorf("stop: %v after %v, want the sweep ended at once", err, took)
			}
		})
	}
}
