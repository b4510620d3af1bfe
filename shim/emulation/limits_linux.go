//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

// A Windows silo's limits are its job object's, enforced by the kernel. The
// emulation enforces them with the cgroup v1 controllers the machine has
// (memory, cpu), in a cgroup per silo and controller, made when the system
// is created with limits or is first given one:
//
//   - memory: the job's limit bounds the commit of the silo's processes
//     together, and an allocation past it fails. Linux counts a process's
//     commit as its private writable mappings (what Wine commits), and
//     RLIMIT_DATA fails an allocation past it: each of the container's
//     processes gets the limit as its RLIMIT_DATA, so an allocation past
//     the limit fails, as on Windows. The silo's memory cgroup gets the
//     limit too (memory.limit_in_bytes), for the processes together: there
//     Linux reclaims and then its OOM killer ends a process, where Windows
//     would fail the allocation;
//   - CPU maximum (hundredths of a percent of all host processors) and CPU
//     count: a CFS quota per period (cpu.cfs_quota_us) of maximum/10000 of
//     the host's processors, or of count processors;
//   - CPU weight: cpu.shares of weight×1024/100 (Windows' default weight,
//     100, is Linux's default share, 1024).
//
// CPU affinity binds the silo's processes (affinity_linux.go). Storage QoS
// is recorded, not enforced; so are the limits of a controller the machine
// lacks, with a warning at create.
//
// A process starts in the silo's cgroups with no moment outside them: the
// thread that forks it joins them first (cgroup v1 moves single threads,
// through tasks) and leaves them after, and a child is born in the cgroups
// of the thread that forked it.

// limitControllers are the cgroup v1 controllers limits use.
var limitControllers = []string{"memory", "cpu"}

// v1Hierarchy is a cgroup v1 hierarchy holding a controller: where it is
// mounted, and this process's cgroup in it.
type v1Hierarchy struct {
	mount, own string
}

// v1Hierarchies returns the machine's cgroup v1 hierarchies of the limit
// controllers, by controller; it looks once.
var v1Hierarchies = sync.OnceValue(func() map[string]v1Hierarchy {
	h, _ := findV1Hierarchies("/proc/self/mountinfo", "/proc/self/cgroup")
	return h
})

func findV1Hierarchies(mountinfo, cgroup string) (map[string]v1Hierarchy, error) {
	mounts := map[string]string{}
	err := scanMounts(mountinfo, func(root, mountpoint, fstype, superOptions string) bool {
		if fstype == "cgroup" && root == "/" {
			for _, opt := range strings.Split(superOptions, ",") {
				mounts[opt] = mountpoint
			}
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(cgroup)
	if err != nil {
		return nil, err
	}
	found := map[string]v1Hierarchy{}
	for _, line := range strings.Split(string(b), "\n") {
		// N:controller[,controller]:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if mount, ok := mounts[c]; ok && slices.Contains(limitControllers, c) {
				found[c] = v1Hierarchy{mount: mount, own: parts[2]}
			}
		}
	}
	return found, nil
}

// makeLimitCgroups makes the silo's limit cgroups for the system in dir,
// for the controllers the machine has, and returns them by controller.
func makeLimitCgroups(dir string) (map[string]string, error) {
	made := map[string]string{}
	for _, c := range limitControllers {
		h, ok := v1Hierarchies()[c]
		if !ok {
			continue
		}
		base := filepath.Join(h.mount, h.own, siloCgroupsDir)
		if err := os.MkdirAll(base, 0o755); err != nil {
			return made, fmt.Errorf("create the silo's %s cgroup: %w", c, err)
		}
		path := filepath.Join(base, siloCgroupName(dir))
		if err := makeCgroup(path); err != nil {
			return made, err
		}
		made[c] = path
	}
	return made, nil
}

// existingLimitCgroups finds the limit cgroups a system in dir made, by
// controller.
func existingLimitCgroups(dir string) map[string]string {
	found := map[string]string{}
	for c, h := range v1Hierarchies() {
		if path := filepath.Join(h.mount, h.own, siloCgroupsDir, siloCgroupName(dir)); isDir(path) == nil {
			found[c] = path
		}
	}
	return found
}

// unenforced names the limits of r the machine's cgroup controllers (have)
// cannot enforce.
func unenforced(r compute.Resources, have map[string]v1Hierarchy) []string {
	var out []string
	if _, ok := have["memory"]; r.MemoryLimitBytes > 0 && !ok {
		out = append(out, "memory limit (no memory cgroup controller)")
	}
	if _, ok := have["cpu"]; (r.CPUCount > 0 || r.CPUMaximum > 0 || r.CPUWeight > 0) && !ok {
		out = append(out, "CPU limits (no cpu cgroup controller)")
	}
	if r.StorageIOPSMaximum > 0 || r.StorageBandwidthMaximum > 0 {
		out = append(out, "storage QoS")
	}
	return out
}

// applyLimits writes r's memory and CPU limits to the silo's cgroups; a
// limit r leaves unset is lifted.
func applyLimits(r compute.Resources, cgroups map[string]string, hostCPUs int) error {
	if path := cgroups["memory"]; path != "" {
		limit := "-1"
		if r.MemoryLimitBytes > 0 {
			limit = strconv.FormatUint(r.MemoryLimitBytes, 10)
		}
		if err := writeCgroupFile(path, "memory.limit_in_bytes", limit); err != nil {
			return err
		}
	}
	if path := cgroups["cpu"]; path != "" {
		b, err := os.ReadFile(filepath.Join(path, "cpu.cfs_period_us"))
		if err != nil {
			return fmt.Errorf("the silo's cpu cgroup: %w", err)
		}
		period, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("the silo's cpu cgroup: cpu.cfs_period_us: %w", err)
		}
		quota := "-1"
		switch {
		case r.CPUMaximum > 0:
			quota = strconv.FormatUint(period*uint64(hostCPUs)*uint64(r.CPUMaximum)/10000, 10)
		case r.CPUCount > 0:
			quota = strconv.FormatUint(period*uint64(r.CPUCount), 10)
		}
		if err := writeCgroupFile(path, "cpu.cfs_quota_us", quota); err != nil {
			return err
		}
		shares := uint64(1024)
		if r.CPUWeight > 0 {
			shares = max(2, uint64(r.CPUWeight)*1024/100)
		}
		if err := writeCgroupFile(path, "cpu.shares", strconv.FormatUint(shares, 10)); err != nil {
			return err
		}
	}
	return nil
}

func writeCgroupFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("set the silo's %s to %s: %w", name, value, err)
	}
	return nil
}

// inLimitCgroups runs start with the calling goroutine locked to its
// thread and that thread in the silo's limit cgroups, so that the process
// start forks is born in them. The thread leaves them after; one that
// cannot stays locked, and so is not reused once the goroutine ends.
func inLimitCgroups(cgroups map[string]string, start func() error) error {
	if len(cgroups) == 0 {
		return start()
	}
	runtime.LockOSThread()
	tid := strconv.Itoa(unix.Gettid())
	var joined []string
	err := func() error {
		for _, c := range limitControllers {
			if path, ok := cgroups[c]; ok {
				if err := writeCgroupFile(path, "tasks", tid); err != nil {
					return err
				}
				joined = append(joined, c)
			}
		}
		return start()
	}()
	for _, c := range joined {
		h := v1Hierarchies()[c]
		if lerr := writeCgroupFile(filepath.Join(h.mount, h.own), "tasks", tid); lerr != nil {
			return errors.Join(err, lerr)
		}
	}
	runtime.UnlockOSThread()
	return err
}

// limitCommit sets the process's RLIMIT_DATA to the silo's memory limit
// (none when 0).
func limitCommit(pid int, limit uint64) error {
	// Only the soft limit: raising a hard one again takes
	// CAP_SYS_RESOURCE, and a Windows program cannot raise its own.
	rl := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if limit > 0 {
		rl.Cur = limit
	}
	if err := unix.Prlimit(pid, unix.RLIMIT_DATA, &rl, nil); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("limit process %d's commit: %w", pid, err)
	}
	return nil
}

// removeLimitCgroups removes the silo's limit cgroups once their processes
// are gone (a killed process leaves them a moment after it is reaped).
func removeLimitCgroups(ctx context.Context, cgroups map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, killGrace)
	defer cancel()
	for c, path := range cgroups {
		for {
			err := unix.Rmdir(path)
			if err == nil || errors.Is(err, fs.ErrNotExist) {
				break
			}
			if !errors.Is(err, unix.EBUSY) {
				return fmt.Errorf("remove the silo's %s cgroup: %w", c, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("remove the silo's %s cgroup %s: still in use: %w", c, path, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}
