package hcs

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	winrecord "github.com/winproc/winproc/shim/record"
)

// goneShim is a shim of this boot that does not run: what it held may
// still be held (winrecord.BootedSince).
var goneShim = winrecord.Shim{PID: 1 << 30, Start: winrecord.Self().Start}

// orphanNode is a backend with: "served", whose shim (this process)
// runs; "dead" and "known", whose shim is gone (containerd still has a
// task of "known"); "norecord", a system of winproc's with no record;
// "stale", a record whose system HCS no longer has; and "foreign", a
// system of another owner.
func orphanNode(t *testing.T) (*Backend, *fakeAPI) {
	t.Helper()
	b, a := testBackend(t)
	ctx := context.Background()
	for _, id := range []string{"served", "dead", "known", "norecord"} {
		s := createSettings()
		s.Layers.Scratch = `C:\snapshots\` + id
		sys, err := b.Create(ctx, id, s)
		if err != nil {
			t.Fatal(err)
		}
		if id == "served" {
			t.Cleanup(func() {
				sys.Terminate(ctx)
				sys.Close()
			})
		}
	}
	for _, id := range []string{"dead", "known", "stale"} {
		if err := b.records.write(record{ID: id, Scratch: `C:\snapshots\` + id, Shim: goneShim}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.records.remove("norecord"); err != nil {
		t.Fatal(err)
	}
	foreign := newFakeSystem(a.hcs, "foreign")
	foreign.owner = "docker"
	a.mu.Lock()
	a.existing["foreign"] = foreign
	a.mu.Unlock()
	return b, a
}

func orphanIDs(os []Orphan) string {
	var ids []string
	for _, o := range os {
		ids = append(ids, o.ID)
	}
	return strings.Join(ids, ",")
}

// FindOrphans lists what no running shim serves and containerd does not
// know; without containerd's answer, a dead shim is enough.
func TestFindOrphans(t *testing.T) {
	b, _ := orphanNode(t)
	ctx := context.Background()
	known := func(id string) bool { return id == "known" }
	cases := []struct {
		name    string
		hasTask func(string) bool
		want    string
	}{
		{"containerd answered", known, "dead,norecord,stale"},
		{"containerd silent", nil, "dead,known,stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := b.FindOrphans(ctx, tc.hasTask)
			if err != nil || orphanIDs(got) != tc.want {
				t.Fatalf("FindOrphans = %+v, %v; want %s", got, err, tc.want)
			}
			for _, o := range got {
				if o.ID == "stale" && (o.State != "" || o.Scratch != `C:\snapshots\stale`) || o.ID == "dead" && (o.State != "Running" || !strings.Contains(o.Why, "pid 1073741824")) {
					t.Errorf("orphan %+v", o)
				}
			}
		})
	}
}

// RemoveOrphan ends each orphan as the shim's delete does and refuses a
// live shim's system; a second sweep finds nothing; a release that
// failed stays recorded and the next sweep finishes it.
func TestRemoveOrphan(t *testing.T) {
	b, a := orphanNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	known := func(id string) bool { return id == "known" }
	// A terminate of "dead" its shim was carrying on when it died: not
	// pending any more, and removed with the orphan.
	pending := pendingTerminationsDir(b.records.dir)
	if err := pending.Write("dead", pendingRecord{ID: "dead", Attempts: 3, Shim: goneShim}); err != nil {
		t.Fatal(err)
	}
	if ps, err := PendingTerminations(b.records.dir); len(ps) != 0 || err != nil {
		t.Errorf("PendingTerminations of a dead shim = %+v, %v", ps, err)
	}

	err := b.RemoveOrphan(ctx, Orphan{ID: "served"})
	if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "running shim") {
		t.Errorf("RemoveOrphan of a live shim's system: %v", err)
	}
	if a.existing["served"].isStopped() {
		t.Fatal("the live shim's system was stopped")
	}

	// The first deactivate fails: "dead" ends, its scratch stays active
	// and recorded.
	a.failNext("deactivate", syscall.Errno(5))
	orphans, err := b.FindOrphans(ctx, known)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, o := range orphans {
		if err := b.RemoveOrphan(ctx, o); err != nil {
			failed = append(failed, o.ID)
		}
	}
	if strings.Join(failed, ",") != "dead" {
		t.Errorf("failed removals %v, want dead", failed)
	}
	again, err := b.FindOrphans(ctx, known)
	if err != nil || orphanIDs(again) != "dead" || again[0].State != "" {
		t.Fatalf("the sweep after a failed release finds %+v, %v; want dead's record", again, err)
	}
	if err := b.RemoveOrphan(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if last, err := b.FindOrphans(ctx, known); err != nil || len(last) != 0 {
		t.Errorf("a second sweep finds %+v, %v", last, err)
	}
	if ids, err := pending.IDs(); len(ids) != 0 || err != nil {
		t.Errorf("pending terminates left: %v, %v", ids, err)
	}
	for _, id := range []string{"dead", "norecord"} {
		if !a.existing[id].isStopped() {
			t.Errorf("orphan %s still runs", id)
		}
	}
	if a.existing["known"].isStopped() || a.existing["served"].isStopped() || a.existing["foreign"].isStopped() {
		t.Error("a system containerd knows, a live shim serves or of another owner was stopped")
	}
	deactivated := map[string]int{}
	for _, c := range a.callList() {
		if s, ok := strings.CutPrefix(c, `deactivate C:\snapshots\`); ok {
			deactivated[s]++
		}
	}
	if deactivated["dead"] != 2 || deactivated["stale"] != 1 || deactivated["known"] != 0 || deactivated["served"] != 0 {
		t.Errorf("deactivated %v", deactivated)
	}
}

// A failed enumeration is an error that names HCS's call: no orphan is
// taken for gone.
func TestFindOrphansHCSFails(t *testing.T) {
	b, a := testBackend(t)
	a.failNext("enumerate", errAlreadyExists)
	_, err := b.FindOrphans(context.Background(), nil)
	var ce *callError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "HcsEnumerateComputeSystems") {
		t.Errorf("FindOrphans = %v", err)
	}
}

// A host without the compute service has no systems, but its records
// are still looked at.
func TestFindOrphansWithoutHCS(t *testing.T) {
	b, a := testBackend(t)
	if err := b.records.write(record{ID: "stale", Scratch: `C:\snapshots\stale`, Shim: goneShim}); err != nil {
		t.Fatal(err)
	}
	a.failNext("enumerate", syscall.Errno(126))
	got, err := b.FindOrphans(context.Background(), nil)
	if err != nil || orphanIDs(got) != "stale" {
		t.Errorf("FindOrphans = %+v, %v", got, err)
	}
}
