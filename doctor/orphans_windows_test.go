//go:build windows

package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/record"
)

// The Windows orphans adapter over hand-written records, on a host
// without HCS (under Wine): a silo's record whose shim is gone and a
// HostProcess container's are listed, a live shim's and one containerd
// knows are not; the container's is removed, the silo's scratch cannot
// be released without the layer functions, so it stays for the next
// sweep, and a live shim's system is refused.
func TestWindowsLeftovers(t *testing.T) {
	root := winetest.TempDir(t)
	w := windowsLeftovers{hcsDir: filepath.Join(root, "hcs"), jobDir: filepath.Join(root, "jobcontainer")}
	me := record.Self()
	self, err := json.Marshal(me)
	if err != nil {
		t.Fatal(err)
	}
	// A shim of this boot that is gone: a scratch it held may still be
	// active (record.BootedSince).
	gone := fmt.Sprintf(`{"pid":1073741824,"start":%d}`, me.Start)
	files := map[string]string{
		filepath.Join(w.hcsDir, "stale.json"):       `{"id":"stale","scratch":"C:\\snapshots\\stale","shim":` + gone + `}`,
		filepath.Join(w.hcsDir, "served.json"):      `{"id":"served","scratch":"C:\\snapshots\\served","shim":` + string(self) + `}`,
		filepath.Join(w.jobDir, "left.json"):        `{"id":"left","users":["hpc-0000000000000001"],"shim":` + gone + `}`,
		filepath.Join(w.jobDir, "known.json"):       `{"id":"known","users":["hpc-0000000000000002"],"shim":` + gone + `}`,
		filepath.Join(w.jobDir, "hostserved.json"):  `{"id":"hostserved","users":["hpc-0000000000000003"],"shim":` + string(self) + `}`,
		filepath.Join(w.hcsDir, "terminating", "x"): ``,
	}
	for path, body := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	tasks := func(ns string) ([]string, error) {
		if ns != "" {
			t.Errorf("tasks asked of namespace %q, not of every namespace", ns)
		}
		return []string{"known"}, nil
	}
	found, err := w.Find(ctx, `C:\ProgramData\containerd\state`, tasks)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, o := range found {
		lines = append(lines, describeOrphan(o))
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		`hcs/stale (its shim (pid 1073741824) is gone and containerd has no task stale): scratch layer C:\snapshots\stale, record ` + filepath.Join(w.hcsDir, "stale.json"),
		`hostprocess/left (its shim (pid 1073741824) is gone and containerd has no task left): temporary user hpc-0000000000000001, record ` + filepath.Join(w.jobDir, "left.json"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("found\n%s\nlacks\n%s", got, want)
		}
	}
	if len(found) != 2 {
		t.Fatalf("found %d orphans:\n%s", len(found), got)
	}
	for _, o := range found {
		err := w.Remove(ctx, "", o)
		if o.Namespace == hostProcessBackend && err != nil {
			t.Errorf("Remove %s: %v", o.ID, err)
		}
		if o.Namespace == hcsBackend && (err == nil || !strings.Contains(err.Error(), `C:\snapshots\stale`)) {
			t.Errorf("Remove %s without the layer functions = %v, want its scratch named", o.ID, err)
		}
	}
	for _, o := range []Orphan{{Namespace: hcsBackend, ID: "served"}, {Namespace: hostProcessBackend, ID: "hostserved"}} {
		if err := w.Remove(ctx, "", o); err == nil || !strings.Contains(err.Error(), "running shim") {
			t.Errorf("Remove of %s, which a running shim serves = %v", o.ID, err)
		}
	}
	again, err := w.Find(ctx, "", tasks)
	if err != nil || len(again) != 1 || again[0].ID != "stale" {
		t.Errorf("the next sweep finds %+v, %v; want the silo's record only", again, err)
	}
	if !strings.HasPrefix(w.Where(""), "in HCS's compute systems of owner winproc, "+w.hcsDir) {
		t.Errorf("Where = %q", w.Where(""))
	}

	// A record that names a user winproc does not make is listed with
	// why it is refused, and -fix leaves it and the user alone.
	t.Run("a refused record", func(t *testing.T) {
		forged := filepath.Join(w.jobDir, "forged.json")
		if err := os.WriteFile(forged, []byte(`{"id":"forged","users":["Administrator"],"shim":`+gone+`}`), 0o600); err != nil {
			t.Fatal(err)
		}
		found, err := w.Find(ctx, "", tasks)
		var o *Orphan
		for i := range found {
			if found[i].ID == "forged" {
				o = &found[i]
			}
		}
		if err != nil || o == nil || !strings.Contains(describeOrphan(*o), `users "Administrator" is refused`) {
			t.Fatalf("Find = %+v, %v; want the forged record listed as refused", found, err)
		}
		if err := w.Remove(ctx, "", *o); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), forged) {
			t.Errorf("Remove of a forged record = %v", err)
		}
		if _, err := os.Stat(forged); err != nil {
			t.Errorf("the refused record is gone: %v", err)
		}
	})
}
