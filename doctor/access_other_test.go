//go:build !windows

package doctor

import (
	"os"
	"reflect"
	"testing"
)

func TestModeAccess(t *testing.T) {
	for _, tc := range []struct {
		mode     os.FileMode
		uid, gid uint32
		want     DirAccess
	}{
		{0o700, 0, 0, DirAccess{}},
		{0o750, 0, 0, DirAccess{}},
		{0o755, 0, 0, DirAccess{Read: []string{"others"}}},
		{0o777, 0, 0, DirAccess{Change: []string{"others"}}},
		{0o770, 0, 10, DirAccess{Change: []string{"group 10"}}},
		{0o740, 0, 10, DirAccess{Read: []string{"group 10"}}},
		{0o700, 1000, 1000, DirAccess{Owner: "uid 1000"}},
		{0o775 | os.ModeDir, 0, 10, DirAccess{Change: []string{"group 10"}, Read: []string{"others"}}},
	} {
		if got := modeAccess(tc.mode, tc.uid, tc.gid); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("modeAccess(%v, %d, %d) = %+v, want %+v", tc.mode, tc.uid, tc.gid, got, tc.want)
		}
	}
}

// The snapshotter's root, as winproc-snapshotter makes it, is root's only.
func TestDirAccessOfSnapshotterRoot(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the directory must be root's")
	}
	dir := t.TempDir() + "/root"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if a, err := Local().DirAccess(dir); err != nil || !reflect.DeepEqual(a, DirAccess{}) {
		t.Errorf("DirAccess = %+v, %v", a, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if a, _ := Local().DirAccess(dir); len(a.Change) == 0 {
		t.Errorf("a directory anyone can write: %+v", a)
	}
}
