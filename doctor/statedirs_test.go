package doctor

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckStateDirs(t *testing.T) {
	const (
		root = `C:\ProgramData\winproc`
		shim = `C:\ProgramData\winproc\hcs`
		snap = `C:\ProgramData\winproc\snapshotter`
	)
	cases := []struct {
		name    string
		access  map[string]DirAccess
		status  Status
		summary string // in the summary, or a detail
		fix     string // in the fix; "" for none
	}{
		{"administrators only", map[string]DirAccess{root: {}, shim: {}, snap: {}}, OK, "administrators only: " + root + ", " + shim + ", " + snap, ""},
		{"none made yet", nil, OK, "none made yet", ""},
		{"made by a user first", map[string]DirAccess{root: {Owner: `NODE\mallory`}}, Fail, root + ` can be changed by its owner NODE\mallory`, "SetSecurityDescriptorSddlForm('O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)')"},
		{"users may add files", map[string]DirAccess{root: {}, snap: {Change: []string{`BUILTIN\Users`}}}, Fail, snap + ` can be changed by BUILTIN\Users`, "Set-Acl -LiteralPath '" + snap + "'"},
		{"users may change what is made in it", map[string]DirAccess{root: {}, shim: {ChangeMade: []string{`BUILTIN\Users`}}}, Fail, shim + ` can be changed by BUILTIN\Users (what is made in it, by an inheritable entry)`, "Set-Acl -LiteralPath '" + shim + "'"},
		{"users may read", map[string]DirAccess{root: {}, shim: {Read: []string{`BUILTIN\Users`}}}, Warn, shim + ` can be read by BUILTIN\Users`, "Set-Acl -LiteralPath '" + shim + "'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := &run{sys: &fakeSystem{goos: "windows", access: tc.access}, goos: "windows"}
			d.checkStateDirs()
			r := d.report.Checks[0]
			text := r.Summary + "\n" + strings.Join(r.Details, "\n")
			if r.Status != tc.status || !strings.Contains(text, tc.summary) {
				t.Errorf("%s %q, details %q; want %s with %q", r.Status, r.Summary, r.Details, tc.status, tc.summary)
			}
			fix := strings.Join(r.Fix, "\n")
			if (tc.fix == "") != (fix == "") || !strings.Contains(fix, tc.fix) {
				t.Errorf("fix %q, want one with %q", fix, tc.fix)
			}
		})
	}
}

// The snapshotter's root is the config's, where it has one; off Windows
// it is the only state directory, and root's is the fix.
func TestCheckStateDirsConfiguredRoot(t *testing.T) {
	sys := &fakeSystem{goos: "linux", access: map[string]DirAccess{"/srv/snapshots": {Change: []string{"others"}}}}
	d := &run{sys: sys, goos: "linux", cfg: &Config{ProxyPlugins: map[string]ProxyPlugin{snapshotterName: {Type: "snapshot", Root: "/srv/snapshots"}}}}
	d.checkStateDirs()
	r := d.report.Checks[0]
	if r.Status != Fail || !strings.Contains(r.Summary, "/srv/snapshots can be changed by others") || len(r.Fix) != 1 || r.Fix[0] != "chown root:root /srv/snapshots && chmod 700 /srv/snapshots" {
		t.Errorf("%s %q, fix %q", r.Status, r.Summary, r.Fix)
	}
	sys.accessErr = errors.New("access denied")
	d = &run{sys: sys, goos: "linux"}
	d.checkStateDirs()
	if r := d.report.Checks[0]; r.Status != Warn || !strings.Contains(r.Summary, "access denied") {
		t.Errorf("%s %q", r.Status, r.Summary)
	}
}
