package jobcontainer

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/record"
)

// orphanHost is a host with the bind filter and: "served", a container a
// running shim (this process) serves; "dead", whose shim died with
// bindings, its rootfs and a temporary user left; "known", whose shim
// is gone but of which containerd has a task.
func orphanHost(t *testing.T) (*Backend, *fakeHost) {
	t.Helper()
	gone := record.Shim{PID: 1 << 30, Start: 1}
	b, f := bindBackend(t)
	s, err := b.Create(context.Background(), "served", bindSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Terminate(context.Background())
		s.Close()
	})
	f.mu.Lock()
	f.binds[`c:\hpc\dead`] = f.volume
	f.binds[`c:\hpc\dead\var\data`] = `C:\data`
	f.users["hpc-00000000000dead0"] = "users"
	f.mu.Unlock()
	for _, h := range []held{
		{ID: "dead", Scratch: `C:\snapshots\dead`, MountPoint: `C:\hpc\dead`, Bindings: []string{`C:\hpc\dead\var\data`}, Users: []string{"hpc-00000000000dead0"}, Shim: gone},
		{ID: "known", Scratch: `C:\snapshots\known`, MountPoint: `C:\hpc\known`, Shim: gone},
	} {
		if err := b.records.Write(h.ID, h); err != nil {
			t.Fatal(err)
		}
	}
	return b, f
}

func TestFindOrphans(t *testing.T) {
	b, _ := orphanHost(t)
	dead := Orphan{ID: "dead", Scratch: `C:\snapshots\dead`, MountPoint: `C:\hpc\dead`, Bindings: []string{`C:\hpc\dead\var\data`}, Users: []string{"hpc-00000000000dead0"}}
	known := Orphan{ID: "known", Scratch: `C:\snapshots\known`, MountPoint: `C:\hpc\known`}
	for _, tc := range []struct {
		name    string
		hasTask func(string) bool
		want    []Orphan
		why     []string
	}{
		{"containerd answered", func(id string) bool { return id == "known" }, []Orphan{dead}, []string{"its shim (pid 1073741824) is gone and containerd has no task dead"}},
		{"containerd silent", nil, []Orphan{dead, known}, []string{"its shim (pid 1073741824) is gone; containerd did not answer", "its shim (pid 1073741824) is gone; containerd did not answer"}},
	} {
		for i, why := range tc.why {
			tc.want[i].Why = why
		}
		got, err := b.FindOrphans(context.Background(), tc.hasTask)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: FindOrphans = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// RemoveOrphan releases an orphan's bindings, rootfs, scratch and users,
// refuses a live shim's container, keeps what it could not release for
// the next sweep, and a sweep after finds nothing.
func TestRemoveOrphan(t *testing.T) {
	b, f := orphanHost(t)
	ctx := context.Background()
	known := func(id string) bool { return id == "known" }
	if err := b.RemoveOrphan(ctx, Orphan{ID: "served"}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("RemoveOrphan of a live shim's container = %v", err)
	}
	if _, ok := f.binds[`c:\hpc\served`]; !ok {
		t.Fatal("the live shim's rootfs was unbound")
	}
	f.failNext("unbind", errorAccessDenied)
	orphans, err := b.FindOrphans(ctx, known)
	if err != nil || len(orphans) != 1 {
		t.Fatalf("FindOrphans = %+v, %v", orphans, err)
	}
	if err := b.RemoveOrphan(ctx, orphans[0]); !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), `C:\hpc\dead\var\data`) {
		t.Fatalf("RemoveOrphan with an unbinding refused = %v", err)
	}
	again, err := b.FindOrphans(ctx, known)
	if err != nil || len(again) != 1 || again[0].ID != "dead" || len(again[0].Bindings) != 1 {
		t.Fatalf("the next sweep finds %+v, %v; want dead's binding", again, err)
	}
	if err := b.RemoveOrphan(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if last, err := b.FindOrphans(ctx, known); err != nil || len(last) != 0 {
		t.Errorf("a second sweep finds %+v, %v", last, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for root := range f.binds {
		if strings.Contains(root, "dead") {
			t.Errorf("binding %s left", root)
		}
	}
	if _, ok := f.users["hpc-00000000000dead0"]; ok {
		t.Error("the temporary user was left")
	}
	if len(f.binds) != 3 {
		t.Errorf("bindings %v: want the live container's 3", f.binds)
	}
}

// A record that names what winproc does not make is refused, naming the
// record and the field, and neither what it names nor the record itself
// is touched: not by Open (the shim's delete), not by Create of the id,
// not by RemoveOrphan (winproc doctor -fix), and FindOrphans says why.
func TestRefusedRecords(t *testing.T) {
	gone := record.Shim{PID: 1 << 30, Start: 1}
	user := tempUserName("c1", "Users")
	for _, tc := range []struct {
		name, field string
		h           held
	}{
		{"a user winproc does not make", "users", held{Users: []string{"Administrator"}}},
		{"a temporary user's prefix only", "users", held{Users: []string{"hpc-admin"}}},
		{"another mount point", "mountPoint", held{MountPoint: `C:\Windows`}},
		{"another container's mount point", "mountPoint", held{MountPoint: `C:\hpc\c2`}},
		{"a binding outside the mount point", "bindings", held{MountPoint: `C:\hpc\c1`, Bindings: []string{`C:\Windows\System32`}}},
		{"a binding that climbs out", "bindings", held{MountPoint: `C:\hpc\c1`, Bindings: []string{`C:\hpc\c1\..\..\Windows`}}},
		{"a binding at the mount point itself", "bindings", held{MountPoint: `C:\hpc\c1`, Bindings: []string{`C:\hpc\c1`}}},
		{"a relative scratch", "scratch", held{Scratch: `..\..\Windows`}},
		{"a scratch that climbs out", "scratch", held{Scratch: `C:\snapshots\..\Windows`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, f := bindBackend(t)
			f.mu.Lock()
			f.users["Administrator"], f.users["hpc-admin"], f.users[user] = "administrators", "administrators", "users"
			f.binds[`c:\windows\system32`] = `C:\x`
			f.binds[`c:\hpc\c1`] = f.volume
			f.mu.Unlock()
			h := tc.h
			h.ID, h.Shim = "c1", gone
			h.Users = append(h.Users, user)
			if err := b.records.Write("c1", h); err != nil {
				t.Fatal(err)
			}
			// Open with the job gone releases what a record names.
			if _, err := b.Open(context.Background(), "c1"); !errdefs.IsNotFound(err) {
				t.Fatalf("Open = %v", err)
			}
			found, err := b.FindOrphans(context.Background(), func(string) bool { return false })
			if err != nil || len(found) != 1 || !strings.Contains(found[0].Refused, `"`+tc.field+`"`) && !strings.Contains(found[0].Refused, tc.field+" ") {
				t.Errorf("FindOrphans = %+v, %v", found, err)
			}
			err = b.RemoveOrphan(context.Background(), Orphan{ID: "c1"})
			if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), b.records.Path("c1")) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("RemoveOrphan = %v; want the record and the field %s named", err, tc.field)
			}
			for _, c := range f.callNames() {
				switch c {
				case "deleteUser", "unbind", "deleteVolumeMountPoint", "remove", "unprepare", "deactivate":
					t.Errorf("%s called for a refused record: %q", c, f.callList())
				}
			}
			if got, ok := b.held(t, "c1"); !ok || !reflect.DeepEqual(got.Users, h.Users) {
				t.Errorf("the record is %+v, %v; want it left as written", got, ok)
			}
		})
	}
}
