package jobcontainer

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
	"github.com/winproc/winproc/shim/record"
)

// Orphans. A container's job object is made to kill its processes when
// its last handle closes, and the serving shim holds the only one: when
// the shim dies, the job and every process in it go with it. What stays
// is what the record names: the bindings of its mapped directories (or
// their links), its rootfs at the mount point with its scratch layer, and
// its temporary users. containerd's delete after the dead shim releases
// them; after a crash of containerd too, or with its state lost, nothing
// would. An orphan is a record whose shim is not running and of which
// containerd has no task (record.Why).

// Orphan is what a HostProcess container no running shim serves left on
// the host, as its record names it.
type Orphan struct {
	ID string
	// Why says why no one serves it.
	Why        string
	Scratch    string
	MountPoint string
	Bindings   []string
	Users      []string
	// Refused says why its record is not acted on (it names what winproc
	// does not make): RemoveOrphan leaves it, and what it names, alone.
	Refused string
}

// FindOrphans lists the containers recorded in the state directory whose
// shim is not running and of which containerd has no task. hasTask says
// whether containerd has a task of an id in any namespace; nil when
// containerd did not answer: then a container whose recorded shim is
// gone is still an orphan, one with no shim recorded is not.
func (b *Backend) FindOrphans(ctx context.Context, hasTask func(id string) bool) ([]Orphan, error) {
	ids, err := b.records.IDs()
	if err != nil {
		return nil, err
	}
	answered := hasTask != nil
	var out []Orphan
	for _, id := range ids {
		h, ok := b.readHeld(ctx, id)
		if !ok {
			continue
		}
		why := record.Why(id, h.Shim, answered, answered && hasTask(id))
		if why == "" {
			continue
		}
		o := Orphan{ID: id, Why: why, Scratch: h.Scratch, MountPoint: h.MountPoint, Bindings: h.Bindings, Users: h.Users}
		if h.refused != nil {
			o.Refused = h.refused.Error()
		}
		out = append(out, o)
	}
	return out, nil
}

// RemoveOrphan releases what the orphan o holds as the shim's delete does
// (compute.Teardown): a job object still there (another process holds a
// handle) is terminated, then the bindings, the rootfs and the scratch
// and the temporary users are released. It refuses a container whose
// recorded shim runs. An orphan already gone is no error; what could not
// be released stays recorded, and the next sweep finds it again.
func (b *Backend) RemoveOrphan(ctx context.Context, o Orphan) error {
	if err := record.CheckID(o.ID); err != nil {
		return err
	}
	var h held
	if _, err := b.records.Read(o.ID, &h); err != nil {
		return fmt.Errorf("orphan %s: %w", o.ID, err)
	}
	if err := b.checkHeld(h); err != nil {
		return err
	}
	if record.Alive(h.Shim) {
		return fmt.Errorf("HostProcess container %s is served by the running shim %d: not an orphan: %w", o.ID, h.Shim.PID, errdefs.ErrFailedPrecondition)
	}
	if err := compute.Teardown(ctx, b, o.ID); err != nil {
		return err
	}
	var left held
	ok, err := b.records.Read(o.ID, &left)
	if err != nil {
		return fmt.Errorf("orphan %s: %w", o.ID, err)
	}
	if ok {
		return fmt.Errorf("HostProcess container %s: still held, for the next sweep: scratch %s, bindings [%s], users [%s]: %w", o.ID, left.Scratch, strings.Join(left.Bindings, " "), strings.Join(left.Users, " "), errdefs.ErrUnavailable)
	}
	log.G(ctx).WithFields(log.Fields{"id": o.ID, "scratch": o.Scratch, "users": o.Users}).Infof("released what an orphaned HostProcess container held (%s)", o.Why)
	return nil
}

// tempUserPattern is what tempUserName makes: no other user is a
// temporary one to delete.
var tempUserPattern = regexp.MustCompile(`^hpc-[0-9a-f]{16}$`)

// checkHeld refuses a record that names what this backend does not make
// (record.Refused): a mount point other than <MountRoot>\<id>, a binding
// not under it, a user not of tempUserName's form, a scratch that is not
// a full path free of "." and ".." components. The scratch's own root is
// the snapshotter's, which the backend is not told; the layer functions
// act on it (UnprepareLayer, DeactivateLayer), they do not remove it.
func (b *Backend) checkHeld(h held) error {
	mountPoint := hostprocess.Join(b.mountRoot, h.ID)
	if h.MountPoint != "" && !strings.EqualFold(h.MountPoint, mountPoint) {
		return b.records.Refused(h.ID, "mountPoint", h.MountPoint, "a container's mount point is "+mountPoint)
	}
	for _, p := range h.Bindings {
		if !record.UnderWindowsRoot(mountPoint, p) {
			return b.records.Refused(h.ID, "bindings", p, "a container's bindings are under its mount point "+mountPoint)
		}
	}
	for _, u := range h.Users {
		if !tempUserPattern.MatchString(u) {
			return b.records.Refused(h.ID, "users", u, "not a temporary user's name (hpc- and 16 hexadecimal digits)")
		}
	}
	if h.Scratch != "" && !fullCleanPath(h.Scratch) {
		return b.records.Refused(h.ID, "scratch", h.Scratch, `not a full path without "." or ".." components`)
	}
	return nil
}

// fullCleanPath reports whether p is a full Windows path, C:\..., with no
// "." or ".." component.
func fullCleanPath(p string) bool {
	return len(p) > 3 && p[1] == ':' && p[2] == '\\' && record.UnderWindowsRoot(p[:2], p)
}
