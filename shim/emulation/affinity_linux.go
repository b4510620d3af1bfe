package emulation

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

// CPU affinity, as a job object's: every process of the silo runs only on
// the processors given, those started later too. Linux has no processor
// groups; processor b of group g is CPU g×64+b.

// affinitySet is the CPU set of a.
func affinitySet(a []compute.CPUGroupAffinity) unix.CPUSet {
	var set unix.CPUSet
	for _, g := range a {
		for b := range 64 {
			if g.Mask&(1<<b) != 0 {
				set.Set(int(g.Group)*64 + b)
			}
		}
	}
	return set
}

// withAffinity runs start on a thread bound to a's processors, so that the
// process it forks is born bound to them; the thread's own affinity is
// restored after. No affinity runs start as it is.
func withAffinity(a []compute.CPUGroupAffinity, start func() error) error {
	if len(a) == 0 {
		return start()
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("read the thread's CPU affinity: %w", err)
	}
	set := affinitySet(a)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("CPU affinity %v: no processor of it is online here: %w", a, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil {
		// The thread stays locked, so it ends with its goroutine and no
		// other goroutine runs bound to the silo's processors.
		return fmt.Errorf("restore the thread's CPU affinity: %w", rerr)
	}
	runtime.UnlockOSThread()
	return err
}

// setAffinity binds every thread of the processes pids to a's processors.
// A process or thread that ended meanwhile is skipped.
func setAffinity(pids []int, a []compute.CPUGroupAffinity) error {
	set := affinitySet(a)
	for _, pid := range pids {
		tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		if err != nil {
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("CPU affinity %v of process %d: %w", a, pid, err)
			}
		}
	}
	return nil
}
