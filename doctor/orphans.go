package doctor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/winproc/winproc/internal/containerdnames"
)

// Orphan is a compute system winproc left on the node that no running
// shim serves and of which containerd has no task: what a crash of the
// shims and containerd leaves, which containerd's clean-up after a dead
// shim never reaches once it has forgotten the task.
type Orphan struct {
	// Namespace and ID name the system as its shim did; ID may be the
	// backend's name of a shared part (the emulation's host prefix). On
	// Windows, whose systems are in no namespace, Namespace names the
	// backend (windowsLeftovers).
	Namespace, ID string
	// Dir holds its record; "" when it has none.
	Dir string
	// Why says why no one serves it.
	Why string
	// Mounts, Cgroup and Processes are what it holds on the node.
	Mounts    []string
	Cgroup    string
	Processes []string
	// Held is what else it holds, one thing each (on Windows: its state
	// in HCS, its scratch layer, bindings, temporary users).
	Held []string
	// pauseRootfs marks a sandbox's pause rootfs in containerd
	// (stalePauseRootfs), which containerd releases, not the backend.
	pauseRootfs bool
}

// Leftovers finds and removes orphans: the compute backend's side of the
// orphans check (the Linux emulation's on Linux).
type Leftovers interface {
	// Where says where Find looks, for the check's summary: "under
	// <dir>", "in <sources>".
	Where(state string) string
	// Find lists the orphans of the node whose containerd keeps its state
	// in state; tasks lists containerd's tasks of a namespace, an error
	// when containerd does not answer.
	Find(ctx context.Context, state string, tasks func(namespace string) ([]string, error)) ([]Orphan, error)
	// Remove removes an orphan Find listed: its processes killed, its
	// mounts unmounted, its cgroups, directories and record removed. One
	// already gone is no error; one a running shim serves again is
	// refused.
	Remove(ctx context.Context, state string, o Orphan) error
}

// defaultStateDir is containerd's state directory when its config sets
// none.
func defaultStateDir(goos string) string {
	if goos == "windows" {
		return `C:\ProgramData\containerd\state`
	}
	return "/run/containerd"
}

// checkOrphans lists what crashed shims left that nothing serves and, with
// Options.Fix, removes it. It runs where the node has a Leftovers.
func (d *run) checkOrphans(ctx context.Context) {
	lo := d.sys.Leftovers()
	if lo == nil {
		return
	}
	state := defaultStateDir(d.goos)
	if d.cfg != nil && d.cfg.State != "" {
		state = d.cfg.State
	}
	tasks := func(ns string) ([]string, error) {
		if !d.cdUp {
			return nil, errors.New("containerd does not answer")
		}
		ctx, cancel := d.ctx(ctx)
		defer cancel()
		return d.cd.Tasks(ctx, ns)
	}
	r := Result{Name: CheckOrphans, Status: OK}
	orphans, err := lo.Find(ctx, state, tasks)
	if err == nil {
		var rootfs []Orphan
		rootfs, err = d.stalePauseRootfs(ctx)
		orphans = append(orphans, rootfs...)
	}
	switch {
	case err != nil:
		r.Status, r.Summary = Warn, fmt.Sprintf("cannot look for orphans %s: %v", lo.Where(state), err)
	case len(orphans) == 0:
		r.Summary = "none " + lo.Where(state) + ": every compute system is served by a running shim or known to containerd"
	case d.o.Fix:
		d.removeOrphans(ctx, lo, state, orphans, &r)
	default:
		r.Status = Fail
		r.Summary = fmt.Sprintf("%d compute systems left behind that no running shim serves and containerd has no task of", len(orphans))
		for _, o := range orphans {
			r.Details = append(r.Details, describeOrphan(o))
		}
		r.Fix = []string{"winproc doctor -fix: ends them as the shim's delete does (their processes killed, their mounts, layers, cgroups or bindings released, their records and directories removed); systems a running shim serves are left alone"}
	}
	d.add(r)
}

// orphanRemoveTimeout bounds the removal of one orphan: the shim's delete
// has as long (a terminate is awaited until the system stops).
const orphanRemoveTimeout = time.Minute

// removeOrphans removes orphans and says what it removed in r.
func (d *run) removeOrphans(ctx context.Context, lo Leftovers, state string, orphans []Orphan, r *Result) {
	var failed []string
	for _, o := range orphans {
		rctx, cancel := context.WithTimeout(ctx, orphanRemoveTimeout)
		var err error
		if o.pauseRootfs {
			err = d.cd.ReleasePauseRootfs(rctx, containerdnames.Snapshotter, PauseRootfs{Namespace: o.Namespace, Sandbox: o.ID})
		} else {
			err = lo.Remove(rctx, state, o)
		}
		cancel()
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/%s: %v", o.Namespace, o.ID, err))
			continue
		}
		r.Details = append(r.Details, "removed "+describeOrphan(o))
	}
	removed := len(orphans) - len(failed)
	r.Summary = fmt.Sprintf("removed %d compute systems left behind that no running shim served", removed)
	if len(failed) > 0 {
		r.Status = Fail
		r.Summary = fmt.Sprintf("%d of %d compute systems left behind could not be removed: %s", len(failed), len(orphans), failed[0])
		r.Details = append(r.Details, failed[1:]...)
		r.Fix = []string{"winproc doctor -fix again; a system still not removed names what holds it"}
	}
}

// describeOrphan is one line of what an orphan holds.
func describeOrphan(o Orphan) string {
	var held []string
	if n := len(o.Processes); n > 0 {
		held = append(held, fmt.Sprintf("%d processes (%s)", n, strings.Join(o.Processes, ", ")))
	}
	if n := len(o.Mounts); n > 0 {
		held = append(held, fmt.Sprintf("%d mounts", n))
	}
	if o.Cgroup != "" {
		held = append(held, "cgroup "+o.Cgroup)
	}
	held = append(held, o.Held...)
	if o.Dir != "" {
		held = append(held, "directory "+o.Dir)
	}
	return fmt.Sprintf("%s/%s (%s): %s", o.Namespace, o.ID, o.Why, strings.Join(held, ", "))
}
