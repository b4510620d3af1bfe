package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/winproc/winproc/internal/containerdnames"
)

// DirAccess is who, besides the node's administrators and SYSTEM (root
// off Windows), can use a directory.
type DirAccess struct {
	// Owner is the directory's owner when it is someone else: an owner
	// can always change who may use it.
	Owner string
	// Change are the others who can change what is in it; Read, those
	// who can only read it.
	Change, Read []string
	// ChangeMade are the others whom an inheritable entry (object or
	// container inherit, inherit-only included) lets change what is made
	// in it later, such as the records the shim writes.
	ChangeMade []string
}

// adminsOnlySDDL is the security descriptor winproc's state directories
// get: owned by Administrators, for Administrators and SYSTEM only, as
// containerd makes its own (sys.SddlAdministratorsLocalSystem).
const adminsOnlySDDL = "O:BAD:P(A;OICI;GA;;;BA)(A;OICI;GA;;;SY)"

// stateDirs are the directories of winproc's state on the node: the
// snapshotter's root (the layers of every image) and, on Windows, the
// shim's records and their common root.
func (d *run) stateDirs() []string {
	root := d.snapshotterRootHint()
	if d.cfg != nil {
		if p, ok := d.cfg.ProxyPlugins[snapshotterName]; ok && p.Root != "" {
			root = p.Root
		}
	}
	dirs := []string{root}
	if d.goos == "windows" {
		dirs = append(dirs, containerdnames.StateRootWindows, containerdnames.ShimStateDirWindows, containerdnames.JobContainerStateDirWindows)
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// checkStateDirs reports a state directory that someone other than the
// node's administrators can change, or read: a user who can write the
// snapshotter's root can change the files of every container, and one who
// made a directory before winproc did owns it.
func (d *run) checkStateDirs() {
	r := Result{Name: CheckStateDirs, Status: OK}
	var problems []issue
	var checked []string
	for _, dir := range d.stateDirs() {
		a, err := d.sys.DirAccess(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			r.Details = append(r.Details, dir+": not made yet (winproc makes it for administrators only)")
			continue
		case err != nil:
			problems = append(problems, issue{Warn, fmt.Sprintf("cannot read who may use %s: %v", dir, err), nil})
			continue
		}
		var who []string
		if a.Owner != "" {
			who = append(who, "its owner "+a.Owner)
		}
		who = append(who, a.Change...)
		for _, m := range a.ChangeMade {
			who = append(who, m+" (what is made in it, by an inheritable entry)")
		}
		switch {
		case len(who) > 0:
			problems = append(problems, issue{Fail, fmt.Sprintf("%s can be changed by %s", dir, strings.Join(who, ", ")), d.stateDirFix(dir)})
		case len(a.Read) > 0:
			problems = append(problems, issue{Warn, fmt.Sprintf("%s can be read by %s", dir, strings.Join(a.Read, ", ")), d.stateDirFix(dir)})
		default:
			checked = append(checked, dir)
		}
	}
	r.Summary = "none made yet"
	if len(checked) > 0 {
		r.Summary = "administrators only: " + strings.Join(checked, ", ")
	}
	applyIssues(&r, problems)
	d.add(r)
}

// stateDirFix makes dir the administrators' again.
func (d *run) stateDirFix(dir string) []string {
	if d.goos == "windows" {
		return []string{
			"in an administrator's PowerShell (install.ps1's New-StateDirectory does the same):",
			"$acl = New-Object System.Security.AccessControl.DirectorySecurity",
			fmt.Sprintf("$acl.SetSecurityDescriptorSddlForm('%s')", adminsOnlySDDL),
			fmt.Sprintf("Set-Acl -LiteralPath '%s' -AclObject $acl", dir),
		}
	}
	return []string{fmt.Sprintf("chown root:root %s && chmod 700 %s", dir, dir)}
}
