package record

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestUnderWindowsRoot(t *testing.T) {
	for _, tc := range []struct {
		root, p string
		want    bool
	}{
		{`C:\hpc\c1`, `C:\hpc\c1\data`, true},
		{`C:\hpc\c1\`, `c:\HPC\C1\data\x`, true},
		{`C:\hpc\c1`, `C:\hpc\c1`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\`, false},
		{`C:\hpc\c1`, `C:\hpc\c10\data`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\..\c2`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\data\..\..\..\Windows`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\...`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\.\data`, false},
		{`C:\hpc\c1`, `C:\hpc\c1\a\\b`, false},
		{`C:\hpc\c1`, `C:\hpc\c1/../../Windows`, false},
		{`C:\hpc\c1`, `D:\hpc\c1\data`, false},
		{`C:\hpc\c1`, `C:\Windows`, false},
		{``, `C:\Windows`, false},
	} {
		if got := UnderWindowsRoot(tc.root, tc.p); got != tc.want {
			t.Errorf("UnderWindowsRoot(%q, %q) = %v, want %v", tc.root, tc.p, got, tc.want)
		}
	}
}

func TestRefused(t *testing.T) {
	d := Dir("state") // named, not made: Refused only names it
	err := d.Refused("c1", "users", "Administrator", "not a temporary user winproc makes")
	if !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Refused = %v", err)
	}
	for _, want := range []string{d.Path("c1"), "users", `"Administrator"`, "not a temporary user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %s", err, want)
		}
	}
}
