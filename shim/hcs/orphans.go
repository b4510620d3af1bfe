package hcs

import (
	"context"
	"fmt"
	"slices"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	winrecord "github.com/winproc/winproc/shim/record"
)

// Orphans. Each system's record names the shim that created it
// (record.Shim). When that shim dies, containerd runs its delete, which
// ends the system, for every task it still has; after a crash of
// containerd too, or with its state lost, nothing would, and the system
// keeps running with its scratch layer mounted. An orphan is a system of
// winproc's (HCS lists them by owner) or a record of one whose shim is
// not running and of which containerd has no task (record.Why).
// FindOrphans lists them; RemoveOrphan ends one as the shim's delete does
// (compute.Teardown).

// Orphan is a compute system no running shim serves, or what one held.
type Orphan struct {
	ID string
	// Why says why no one serves it.
	Why string
	// State is HCS's state of the system, "" when HCS no longer lists it
	// (its record still names a scratch layer to release).
	State string
	// Scratch is the scratch layer its record names, "" without one.
	Scratch string
}

// FindOrphans lists the compute systems of owner winproc that HCS has and
// the systems the state directory has records of, whose shim is not
// running and of which containerd has no task. hasTask says whether
// containerd has a task of an id in any namespace; it is nil when
// containerd did not answer: then a system whose recorded shim is gone is
// still an orphan, one with no shim recorded is not.
func (b *Backend) FindOrphans(ctx context.Context, hasTask func(id string) bool) ([]Orphan, error) {
	systems, err := b.api.listSystems(ctx, Owner)
	// A host without the compute service (no computecore.dll) has no
	// compute systems; its records may still name scratch layers.
	if f := b.api.facts(err); err != nil && !f.ServiceMissing {
		return nil, classify("list the compute systems of owner "+Owner, err, f)
	}
	ids, err := winrecord.Dir(b.records.dir).IDs()
	if err != nil {
		return nil, err
	}
	state := make(map[string]string, len(systems))
	for _, s := range systems {
		state[s.Id] = s.State
		ids = append(ids, s.Id)
	}
	slices.Sort(ids)
	answered := hasTask != nil
	var out []Orphan
	for _, id := range slices.Compact(ids) {
		rec, err := b.records.read(id)
		if err != nil {
			log.G(ctx).WithError(err).WithField("id", id).Warn("an unreadable record: the system is taken to name no shim")
		}
		o := Orphan{ID: id, State: state[id]}
		var shim winrecord.Shim
		if rec != nil {
			shim, o.Scratch = rec.Shim, rec.Scratch
		}
		if o.Why = winrecord.Why(id, shim, answered, answered && hasTask(id)); o.Why != "" {
			out = append(out, o)
		}
	}
	return out, nil
}

// RemoveOrphan ends the orphan o as the shim's delete does
// (compute.Teardown): the system terminated and closed, then its
// Container Credential Guard instance and scratch layer released and its
// record removed; a system HCS no longer has only releases what its
// record names. It refuses a system whose recorded shim runs. An orphan
// already gone is no error; what could not be released stays recorded,
// and the next sweep finds it again.
func (b *Backend) RemoveOrphan(ctx context.Context, o Orphan) error {
	if err := checkID(o.ID); err != nil {
		return err
	}
	rec, err := b.records.read(o.ID)
	if err != nil {
		return fmt.Errorf("orphan %s: %w", o.ID, err)
	}
	if rec != nil && winrecord.Alive(rec.Shim) {
		return fmt.Errorf("compute system %s is served by the running shim %d: not an orphan: %w", o.ID, rec.Shim.PID, errdefs.ErrFailedPrecondition)
	}
	if err := compute.Teardown(ctx, b, o.ID); err != nil {
		return err
	}
	if left, err := b.records.read(o.ID); err != nil {
		return fmt.Errorf("orphan %s ended: %w", o.ID, err)
	} else if left != nil {
		return fmt.Errorf("compute system %s ended, but its scratch layer %s is still recorded as held; the next sweep releases it: %w", o.ID, left.Scratch, errdefs.ErrUnavailable)
	}
	// A terminate recorded as pending by a process now gone ended with it.
	if err := pendingTerminationsDir(b.records.dir).Remove(o.ID); err != nil {
		log.G(ctx).WithError(err).WithField("id", o.ID).Warn("remove the record of a pending terminate")
	}
	log.G(ctx).WithFields(log.Fields{"id": o.ID, "scratch": o.Scratch}).Infof("removed an orphaned compute system (%s)", o.Why)
	return nil
}
