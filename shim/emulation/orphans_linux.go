//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/containerd/log"

	"github.com/winproc/winproc/shim/record"
)

// Orphans. A shim records itself (pid and start time) in each system it
// creates. When it dies, containerd runs its delete, which removes the
// system, for every task bundle it still has; after a crash of containerd
// too, or with its state directory lost, nothing would: the silo's
// wineserver and Wine processes, its cgroup and its mounts stay. An orphan
// is a system whose shim is not running and of which containerd has no
// task. FindOrphans lists them and RemoveOrphan removes one with the
// teardown of the shim's delete (Remove).

// HostPrefixID is the Orphan.ID of a Root's host prefix.
const HostPrefixID = hostDirName

// createGrace is how old a system directory without a recorded shim must
// be to be taken as left behind rather than being created.
const createGrace = time.Minute

// Orphan is what a system no running shim serves holds on the node.
type Orphan struct {
	// ID is the system's id, or HostPrefixID.
	ID  string
	Dir string
	// Why says why no one serves it.
	Why string
	// Mounts are the mount points below Dir (and, for a HostProcess
	// container, at its mount point in the host prefix).
	Mounts []string
	// Cgroup is its cgroup v2 directory, "" if it has none.
	Cgroup string
	// Processes are its live processes, "pid name".
	Processes []string
}

// FindOrphans lists the systems under root (a Backend's Root, one
// containerd namespace) whose shim is not running and of which containerd
// has no task, hasTask says; then the host prefix, when none of its users
// is left but orphans. hasTask is nil when containerd did not answer: a
// system whose recorded shim is gone is still an orphan (containerd would
// only run its delete), one with no shim recorded is not.
func FindOrphans(root string, hasTask func(id string) bool) ([]Orphan, error) {
	ids, err := systemEntries(root)
	if err != nil {
		return nil, fmt.Errorf("emulation: orphans: %w", err)
	}
	var out []Orphan
	orphans := map[string]bool{}
	for _, id := range ids {
		if id == hostDirName {
			continue
		}
		dir := filepath.Join(root, id)
		st, err := loadState(dir)
		if err != nil {
			st = nil
		}
		why := orphaned(dir, id, st, hasTask)
		if why == "" {
			continue
		}
		o, err := describeOrphan(id, dir, st)
		if err != nil {
			return nil, err
		}
		o.Why = why
		out = append(out, o)
		orphans[id] = true
	}
	host, err := hostOrphan(root, orphans)
	if err != nil {
		return nil, err
	}
	if host != nil {
		out = append(out, *host)
	}
	return out, nil
}

// orphaned says why the system id in dir, of state st (nil when
// unreadable), is an orphan, "" when it is not.
func orphaned(dir, id string, st *persisted, hasTask func(string) bool) string {
	var shim record.Shim
	if st != nil {
		shim = record.Shim{PID: st.ShimPID, Start: st.ShimStart}
	}
	answered := hasTask != nil
	why := record.Why(id, shim, answered, answered && hasTask(id))
	if why != "" && shim.PID == 0 {
		if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < createGrace {
			return "" // perhaps being created
		}
	}
	return why
}

// describeOrphan gathers the mounts, cgroup and processes of the system id
// in dir, of state st (nil when unreadable).
func describeOrphan(id, dir string, st *persisted) (Orphan, error) {
	o := Orphan{ID: id, Dir: dir}
	if st != nil {
		o.Cgroup = st.Cgroup
	} else if t, err := siloCgroups(); err == nil && isDir(t.siloOf(dir)) == nil {
		o.Cgroup = t.siloOf(dir)
	}
	var err error
	if o.Mounts, err = mountsUnder(dir); err != nil {
		return o, err
	}
	if st != nil && st.HostProcess != nil && st.HostProcess.MountPoint != "" {
		mps, err := mountsUnder(st.HostProcess.MountPoint)
		if err != nil {
			return o, err
		}
		o.Mounts = append(o.Mounts, mps...)
	}
	procs, err := siloMembers(o.Cgroup, filepath.Join(dir, prefixDir))
	if err != nil {
		return o, fmt.Errorf("emulation: orphan %s: %w", id, err)
	}
	for _, p := range procs {
		o.Processes = append(o.Processes, strconv.Itoa(p.pid)+" "+p.comm)
	}
	return o, nil
}

// hostOrphan returns the host prefix under root as an orphan when it
// exists and every user it records is an orphan or gone; nil otherwise.
func hostOrphan(root string, orphans map[string]bool) (*Orphan, error) {
	dir := filepath.Join(root, hostDirName)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if liveHostUser(root, orphans) != "" {
		return nil, nil
	}
	st, err := loadState(dir)
	if err != nil {
		st = nil
	}
	o, err := describeOrphan(hostDirName, dir, st)
	if err != nil {
		return nil, err
	}
	o.Why = "no HostProcess container a running shim serves uses it"
	return &o, nil
}

// liveHostUser returns a user of root's host prefix that is not among
// orphans and whose system directory exists, "" when there is none.
func liveHostUser(root string, orphans map[string]bool) string {
	users, _ := os.ReadDir(filepath.Join(root, hostDirName, hostUsersDir))
	for _, u := range users {
		if orphans[u.Name()] {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, u.Name())); err == nil {
			return u.Name()
		}
	}
	return ""
}

// RemoveOrphan removes the orphan o that FindOrphans found under root: a
// system as the shim's delete does (Remove: its processes killed, its
// mounts unmounted, lazily when busy, its cgroups and directory removed;
// a HostProcess container also leaves the host prefix, which goes with
// its last user), the host prefix as its last user does. It refuses a
// system whose shim runs again, and a host prefix a live container has
// joined since. An orphan already gone is no error.
func RemoveOrphan(ctx context.Context, root string, o Orphan) error {
	b, err := New(Config{Root: root})
	if err != nil {
		return err
	}
	if o.ID == hostDirName {
		return b.removeOrphanHost(ctx)
	}
	dir, err := b.dir(o.ID)
	if err != nil {
		return err
	}
	if st, err := loadState(dir); err == nil && st.ShimPID != 0 && processAlive(st.ShimPID, st.ShimStart) {
		return fmt.Errorf("emulation: system %s is served by the running shim %d: not an orphan", o.ID, st.ShimPID)
	}
	if err := b.Remove(ctx, o.ID); err != nil {
		return err
	}
	log.G(ctx).WithField("system", o.ID).Infof("emulation: removed an orphan (%s): %d mounts, %d processes", o.Why, len(o.Mounts), len(o.Processes))
	return nil
}

// removeOrphanHost removes the host prefix unless a HostProcess container
// that is no orphan uses it.
func (b *Backend) removeOrphanHost(ctx context.Context) error {
	unlock, err := b.lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	users, _ := os.ReadDir(filepath.Join(b.hostDir(), hostUsersDir))
	for _, u := range users {
		st, err := loadState(filepath.Join(b.root, u.Name()))
		if err == nil && st.ShimPID != 0 && processAlive(st.ShimPID, st.ShimStart) {
			return fmt.Errorf("emulation: the host prefix is used by %s, which the running shim %d serves: not an orphan", u.Name(), st.ShimPID)
		}
	}
	st, err := loadState(b.hostDir())
	if err != nil {
		st = nil
	}
	if err := b.removeHost(ctx, st); err != nil {
		return err
	}
	log.G(ctx).Info("emulation: removed an orphaned host prefix")
	return nil
}
