//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

// Stats sums the silo's processes (the wineserver included):
//
//   - CPU: the silo's cgroup's, which counts every process that ran in it;
//     without a cgroup, utime and stime of the running processes plus
//     those of the processes that ended and were reaped by this process
//     (their own wait4 rusage), so processes reaped elsewhere are missed;
//   - memory: CommitBytes is the size of private writable mappings (what
//     Wine has committed), PrivateWorkingSetBytes the resident private
//     pages, CommitPeakBytes the highest CommitBytes of the samples taken
//     so far (readMem);
//   - storage: read_bytes and write_bytes of /proc/<pid>/io (what reached
//     the storage layer, for every file system, not only the scratch; page
//     cache hits are not reads) of running processes only, and as counts
//     one per 64 KiB started of each process's bytes (ioCount).
func (s *system) Stats(ctx context.Context) (*compute.Stats, error) {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if last := s.lastStats; last != nil && time.Since(last.Timestamp) < statsReuse {
		s.mu.Unlock()
		st := *last
		return &st, nil
	}
	started := s.started
	user, kernel := s.cpuUser, s.cpuKernel
	s.mu.Unlock()
	var pids []int
	if s.st.Cgroup != "" {
		// A cgroup accounts every process that ran in it, and lists its
		// processes without a look at each.
		var err error
		if user, kernel, err = siloCgroupCPU(s.st.Cgroup); err != nil {
			return nil, fmt.Errorf("emulation: system %s: %w", s.id, err)
		}
		if pids, err = cgroupPIDs(s.st.Cgroup); err != nil {
			return nil, fmt.Errorf("emulation: system %s: %w", s.id, err)
		}
	} else {
		procs, err := s.processes()
		if err != nil {
			return nil, err
		}
		for _, p := range procs {
			user += ticks(p.utime)
			kernel += ticks(p.stime)
			pids = append(pids, p.pid)
		}
	}
	now := time.Now()
	st := &compute.Stats{Timestamp: now, ContainerStartTime: started}
	if !started.IsZero() {
		st.Uptime = now.Sub(started)
	}
	for _, pid := range pids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m := readMem(pid)
		st.Memory.CommitBytes += m.commit
		st.Memory.PrivateWorkingSetBytes += m.privateWS
		io := readIO(pid)
		st.Storage.ReadBytes += io.readBytes
		st.Storage.WriteBytes += io.writeBytes
		st.Storage.ReadCount += ioCount(io.readBytes)
		st.Storage.WriteCount += ioCount(io.writeBytes)
	}
	st.CPU.RuntimeUserNS = uint64(user)
	st.CPU.RuntimeKernelNS = uint64(kernel)
	st.CPU.TotalRuntimeNS = uint64(user + kernel)
	s.mu.Lock()
	if st.Memory.CommitBytes > s.commitPeak {
		s.commitPeak = st.Memory.CommitBytes
	}
	st.Memory.CommitPeakBytes = s.commitPeak
	last := *st
	s.lastStats = &last
	s.mu.Unlock()
	return st, nil
}

// statsReuse is how long a silo's statistics answer again: containerd's CRI
// asks every second for each container's and, a moment later, for its
// pod's, which sum the pod's silos.
const statsReuse = 200 * time.Millisecond

// ProcessList lists the silo's Windows processes: every process of the
// silo but the wineserver, Wine's system processes (services.exe,
// winedevice.exe, ...) included, as a silo's are on Windows. Pids are Linux
// pids.
func (s *system) ProcessList(ctx context.Context) ([]compute.ProcessInfo, error) {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	procs, err := s.processes()
	if err != nil {
		return nil, err
	}
	out := make([]compute.ProcessInfo, 0, len(procs))
	for _, p := range procs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.Lock()
		server := s.isServer(p)
		s.mu.Unlock()
		if !server {
			out = append(out, processInfo(p))
		}
	}
	return out, nil
}

// Modify sets the silo's memory and CPU limits live, as a job object's
// (limits_linux.go): the cgroups' limits, made on the first one, and each
// running process's commit limit but Wine's own. A zero field of r leaves
// that limit as it is (compute.System's contract); a CPU limit replaces
// the previous one, whatever its kind. A limit this machine cannot
// enforce (no controller, storage QoS) is ErrNotSupported. CPU affinity
// binds every process of the silo; an update of the affinity alone leaves
// the limits as they are.
func (s *system) Modify(ctx context.Context, r compute.Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if limits := (compute.Resources{CPUAffinity: r.CPUAffinity}); len(r.CPUAffinity) > 0 && reflect.DeepEqual(r, limits) {
		return s.setAffinityLocked(r.CPUAffinity)
	}
	if !resourcesSet(r) {
		return nil
	}
	if u := unenforced(r, v1Hierarchies()); len(u) > 0 {
		return errNotSupported("emulation: system %s: this machine cannot enforce %s", s.id, strings.Join(u, ", "))
	}
	if len(s.st.LimitCgroups) == 0 {
		// The first limit: the silo's processes move into cgroups made
		// for it.
		cgroups, err := makeLimitCgroups(s.dir)
		s.st.LimitCgroups = cgroups
		if err == nil {
			err = saveState(s.dir, s.st)
		}
		if err == nil {
			err = s.joinLimitCgroups()
		}
		if err != nil {
			return fmt.Errorf("emulation: system %s: %w", s.id, err)
		}
	}
	next := changedLimits(s.st.Resources, r)
	if err := applyLimits(next, s.st.LimitCgroups, s.b.HostCPUs()); err != nil {
		if errors.Is(err, unix.EBUSY) {
			// The kernel could not reclaim the silo's pages below the
			// limit: a job would fail the next allocation instead.
			return fmt.Errorf("emulation: system %s: the memory limit %d is below what the silo's processes use: %w: %w", s.id, next.MemoryLimitBytes, err, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("emulation: system %s: %w", s.id, err)
	}
	// A running process's commit limit follows, but for Wine's own; the
	// affinity binds all of them, as a job object's.
	procs, err := s.processes()
	if err != nil {
		return err
	}
	for _, p := range procs {
		if r.MemoryLimitBytes != 0 && !s.isServer(p) && !isWineSystemProcess(p.pid) {
			if err := limitCommit(p.pid, r.MemoryLimitBytes); err != nil {
				return fmt.Errorf("emulation: system %s: %w", s.id, err)
			}
		}
	}
	s.st.Resources = next
	if len(r.CPUAffinity) > 0 {
		// Saves the state too.
		return s.setAffinityLocked(r.CPUAffinity)
	}
	return saveState(s.dir, s.st)
}

// changedLimits is prev with r's limits: a zero field of r is no change,
// and a CPU limit of r replaces prev's, whatever its kind. The affinity is
// prev's (setAffinityLocked changes it).
func changedLimits(prev, r compute.Resources) compute.Resources {
	next := prev
	if r.CPUCount != 0 || r.CPUMaximum != 0 || r.CPUWeight != 0 {
		next.CPUCount, next.CPUMaximum, next.CPUWeight = r.CPUCount, r.CPUMaximum, r.CPUWeight
		next.CPUCountCapped, next.RequestedCPUCount = r.CPUCountCapped, r.RequestedCPUCount
	}
	if r.MemoryLimitBytes != 0 {
		next.MemoryLimitBytes = r.MemoryLimitBytes
	}
	return next
}

// setAffinityLocked binds the silo's processes to a, and records it for the
// processes to come.
func (s *system) setAffinityLocked(a []compute.CPUGroupAffinity) error {
	procs, err := s.processes()
	if err != nil {
		return err
	}
	pids := make([]int, 0, len(procs))
	for _, p := range procs {
		pids = append(pids, p.pid)
	}
	if err := setAffinity(pids, a); err != nil {
		return fmt.Errorf("emulation: system %s: %w", s.id, err)
	}
	s.st.Resources.CPUAffinity = a
	return saveState(s.dir, s.st)
}

// joinLimitCgroups moves the silo's processes into its limit cgroups, until
// none is left outside (a process may fork while they move).
func (s *system) joinLimitCgroups() error {
	for range 3 {
		procs, err := s.processes()
		if err != nil {
			return err
		}
		for _, path := range s.st.LimitCgroups {
			for _, p := range procs {
				if err := writeCgroupFile(path, "cgroup.procs", strconv.Itoa(p.pid)); err != nil && !errors.Is(err, unix.ESRCH) {
					return err
				}
			}
		}
		after, err := s.processes()
		if err != nil {
			return err
		}
		if len(after) == len(procs) {
			return nil
		}
	}
	return nil
}
