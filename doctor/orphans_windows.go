//go:build windows

package doctor

import (
	"context"
	"fmt"
	"slices"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/hcs"
	"github.com/winproc/winproc/shim/jobcontainer"
	"github.com/winproc/winproc/shim/record"
)

// Namespace of a Windows orphan: its backend.
const (
	hcsBackend         = "hcs"
	hostProcessBackend = "hostprocess"
)

// localLeftovers are the Windows backends': the HCS backend's compute
// systems (HCS lists those of owner winproc) and its records, and the
// HostProcess containers' records, in winproc's state directories.
func localLeftovers() Leftovers {
	return windowsLeftovers{hcsDir: containerdnames.ShimStateDirWindows, jobDir: containerdnames.JobContainerStateDirWindows}
}

// windowsLeftovers finds orphans in HCS and in the backends' record
// directories. containerd's state directory plays no part: the records
// are winproc's own.
type windowsLeftovers struct{ hcsDir, jobDir string }

func (w windowsLeftovers) Where(string) string {
	return fmt.Sprintf("in HCS's compute systems of owner %s, %s and %s", hcs.Owner, w.hcsDir, w.jobDir)
}

func (w windowsLeftovers) backends() (*hcs.Backend, *jobcontainer.Backend, error) {
	silos, err := hcs.New(hcs.Options{StateDir: w.hcsDir})
	if err != nil {
		return nil, nil, err
	}
	hostProcess, err := jobcontainer.New(jobcontainer.Options{StateDir: w.jobDir})
	if err != nil {
		return nil, nil, err
	}
	return silos, hostProcess, nil
}

// Find lists both backends' orphans. A container id is containerd's in
// whichever namespace: it has a task when any namespace has one of it.
func (w windowsLeftovers) Find(ctx context.Context, _ string, tasks func(string) ([]string, error)) ([]Orphan, error) {
	silos, hostProcess, err := w.backends()
	if err != nil {
		return nil, err
	}
	var hasTask func(string) bool
	if ids, err := tasks(""); err == nil {
		hasTask = func(id string) bool { return slices.Contains(ids, id) }
	}
	found, err := silos.FindOrphans(ctx, hasTask)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, o := range found {
		held := []string{"scratch layer " + o.Scratch}
		if o.Scratch == "" {
			held = []string{"no record of its scratch layer"}
		}
		if o.State != "" {
			held = append([]string{"HCS state " + o.State}, held...)
		}
		out = append(out, Orphan{Namespace: hcsBackend, ID: o.ID, Why: o.Why, Held: append(held, recordOf(w.hcsDir, o.ID)...)})
	}
	jobs, err := hostProcess.FindOrphans(ctx, hasTask)
	if err != nil {
		return nil, err
	}
	for _, o := range jobs {
		var held []string
		if o.Scratch != "" {
			held = append(held, "scratch layer "+o.Scratch)
		}
		if o.MountPoint != "" {
			held = append(held, "rootfs at "+o.MountPoint)
		}
		for _, b := range o.Bindings {
			held = append(held, "binding "+b)
		}
		for _, u := range o.Users {
			held = append(held, "temporary user "+u)
		}
		if o.Refused != "" {
			// -fix leaves it: RemoveOrphan refuses it too.
			held = append(held, o.Refused)
		}
		out = append(out, Orphan{Namespace: hostProcessBackend, ID: o.ID, Why: o.Why, Held: append(held, recordOf(w.jobDir, o.ID)...)})
	}
	return out, nil
}

// recordOf names the record of id in dir, none when there is none.
func recordOf(dir, id string) []string {
	var v struct{}
	if ok, err := record.Dir(dir).Read(id, &v); err != nil || !ok {
		return nil
	}
	return []string{"record " + record.Dir(dir).Path(id)}
}

func (w windowsLeftovers) Remove(ctx context.Context, _ string, o Orphan) error {
	silos, hostProcess, err := w.backends()
	if err != nil {
		return err
	}
	switch o.Namespace {
	case hcsBackend:
		return silos.RemoveOrphan(ctx, hcs.Orphan{ID: o.ID, Why: o.Why})
	case hostProcessBackend:
		return hostProcess.RemoveOrphan(ctx, jobcontainer.Orphan{ID: o.ID, Why: o.Why})
	}
	return fmt.Errorf("orphan %s/%s: no Windows backend of that name", o.Namespace, o.ID)
}
