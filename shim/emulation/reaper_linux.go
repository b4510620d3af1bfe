//go:build linux

package emulation

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Wine double-forks every process a Windows program creates, and its
// system processes (services.exe, winedevice.exe, ...) outlive the process
// that started them, so a silo's processes become orphans. On the machines
// this backend serves, PID 1 does not reap orphans, and they would linger as
// zombies. New therefore makes the shim process a child subreaper
// (PR_SET_CHILD_SUBREAPER): orphans of its descendants are re-parented to it
// instead of PID 1, and the reaper reaps them.
//
// It must not steal an exit status from os/exec: a blanket wait4(-1) would
// reap the processes exec.Cmd.Wait is waiting for (this backend's and
// anybody else's in the shim). So the reaper only ever waits for specific
// pids, children of this process that were not started through the reaper
// (start registers every process a Backend starts, under the lock the
// reaper holds while it works, so a process is registered before the reaper
// can see it) and that are a silo's zombies.
//
// With silos in cgroups (cgroup_linux.go) a zombie names its silo's cgroup
// in /proc/<pid>/cgroup, so a pass runs on SIGCHLD only (an orphan's death
// sends one to its subreaper): an idle shim does no work. Without cgroups a
// silo's process is known by its environment, which a zombie no longer has,
// so the reaper must see orphans alive: a pass runs on every SIGCHLD and
// every reapInterval while any system is open, and reaps
//
//   - known orphans of a silo: seen alive, re-parented here, with a silo's
//     WINEPREFIX in their environment, or
//   - zombies whose command name is a Wine one (ends in .exe, or starts
//     with wine): short-lived orphans that died between two passes. The
//     rest of the shim starts no such programs.
//
// There, an orphan that died unseen and whose name the kernel cut to 15
// bytes, losing its ".exe" (a long exe name), is not recognised and stays a
// zombie until the shim exits; leak checks treat zombies as gone. The
// reaped processes' CPU times (from wait4's rusage) are added to their
// system's, so Stats counts the work of processes that have ended (a cgroup
// counts it by itself).

const reapInterval = 500 * time.Millisecond

// The reaper is one per process, shared by every Backend: a reaper that
// did not know another Backend's children could steal their exit statuses.
var (
	theReaperOnce sync.Once
	theReaper     *reaper
)

func processReaper() *reaper {
	theReaperOnce.Do(func() {
		theReaper = &reaper{
			self:     os.Getpid(),
			children: map[int]bool{},
			orphans:  map[int]string{},
			live:     map[string]*system{},
			roots:    map[string]bool{},
			wake:     make(chan struct{}, 1),
		}
	})
	return theReaper
}

type reaper struct {
	self int

	// mu is held while a child is started and registered, and for each
	// pass.
	mu sync.Mutex
	// children are the pids of processes started through start and not yet
	// waited for by their exec.Cmd.
	children map[int]bool
	// orphans are re-parented silo processes seen alive, with their
	// system's prefix.
	orphans map[int]string
	// live are the open systems of every Backend, by directory
	// (HostProcess containers share a prefix); roots are the Backends'
	// roots.
	live  map[string]*system
	roots map[string]bool
	// running says a loop goroutine runs.
	running bool
	wake    chan struct{}
	// cgroups, when set, is where silos' cgroups are: membership of a
	// zombie is read there, and the reaper does not poll.
	cgroups *cgroupTree
}

// useCgroups tells the reaper that silos' processes are in cgroups of t.
func (r *reaper) useCgroups(t *cgroupTree) {
	r.mu.Lock()
	r.cgroups = t
	r.mu.Unlock()
}

// addRoot notes a Backend's root: processes with a prefix below it are
// silo processes.
func (r *reaper) addRoot(root string) {
	r.mu.Lock()
	r.roots[root] = true
	r.mu.Unlock()
}

// isSiloPrefix reports whether p is the prefix of a system under a
// Backend's root; r.mu is held.
func (r *reaper) isSiloPrefix(p string) bool {
	return filepath.Base(p) == prefixDir && r.roots[filepath.Dir(filepath.Dir(p))]
}

// systemByPrefix is the open silo whose prefix is p, nil if none: reaped
// orphans are known by their prefix only without cgroups, where there are
// no HostProcess containers.
func (r *reaper) systemByPrefix(p string) *system {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.live {
		if s.prefix == p && s.st.HostProcess == nil {
			return s
		}
	}
	return nil
}

// start starts cmd and registers it as the backend's own child, so the
// reaper leaves it to cmd.Wait. The caller calls waited after cmd.Wait.
func (r *reaper) start(cmd *exec.Cmd) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.children[cmd.Process.Pid] = true
	return nil
}

// waited unregisters a child cmd.Wait has reaped.
func (r *reaper) waited(pid int) {
	r.mu.Lock()
	delete(r.children, pid)
	r.mu.Unlock()
}

// acquire notes an open system and makes sure the loop runs.
func (r *reaper) acquire(s *system) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live[s.dir] = s
	if !r.running {
		r.running = true
		go r.loop()
	}
}

// release notes a closed system and runs a pass soon; the loop ends once
// no system is open and no known orphan is left.
func (r *reaper) release(s *system) {
	r.mu.Lock()
	if r.live[s.dir] == s {
		delete(r.live, s.dir)
	}
	r.mu.Unlock()
	r.poke()
}

// poke asks for a pass now.
func (r *reaper) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// loop is the reaper's goroutine. The reaper owns it; it ends when no
// system is open and no orphan is pending, and starts again with the next.
func (r *reaper) loop() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	r.mu.Lock()
	poll := r.cgroups == nil
	r.mu.Unlock()
	var tick <-chan time.Time
	if poll {
		t := time.NewTicker(reapInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-sigs:
		case <-r.wake:
		case <-tick:
		}
		if r.pass() {
			return
		}
	}
}

// pass reaps what it may and reports whether the loop should end.
func (r *reaper) pass() (done bool) {
	type usage struct {
		prefix string
		ru     unix.Rusage
	}
	var reaped []usage

	r.mu.Lock()
	pids, err := childPIDs(r.self)
	// siloOrphans counts the live orphans in silos' cgroups: the loop
	// goes on while there are any, to reap them once they die.
	siloOrphans := 0
	if err == nil {
		present := map[int]bool{}
		for _, pid := range pids {
			present[pid] = true
			if r.children[pid] {
				continue
			}
			st, err := readStat(pid)
			if err != nil || st.ppid != r.self {
				continue
			}
			if r.cgroups != nil {
				if !r.cgroups.holds(pid) {
					continue
				}
				if !st.gone() {
					siloOrphans++
					continue
				}
				var ws unix.WaitStatus
				unix.Wait4(pid, &ws, unix.WNOHANG, nil)
				continue
			}
			prefix, known := r.orphans[pid]
			if !st.gone() {
				if !known {
					if p := environPrefix(pid); p != "" && r.isSiloPrefix(p) {
						r.orphans[pid] = p
					}
				}
				continue
			}
			if !known && !wineComm(st.comm) {
				continue
			}
			var ws unix.WaitStatus
			var ru unix.Rusage
			if wpid, err := unix.Wait4(pid, &ws, unix.WNOHANG, &ru); err == nil && wpid == pid {
				delete(r.orphans, pid)
				if known {
					reaped = append(reaped, usage{prefix, ru})
				}
			}
		}
		// Forget orphans that are no longer children (reaped above, or
		// never ours).
		for pid := range r.orphans {
			if !present[pid] {
				delete(r.orphans, pid)
			}
		}
	}
	if len(r.live) == 0 && len(r.orphans) == 0 && siloOrphans == 0 {
		r.running = false
		done = true
	}
	r.mu.Unlock()

	for _, u := range reaped {
		if s := r.systemByPrefix(u.prefix); s != nil {
			s.addCPU(timevalDuration(u.ru.Utime), timevalDuration(u.ru.Stime))
		}
	}
	return done
}

// wineComm reports whether a command name is one Wine gives its processes:
// the Windows executable's name, or Wine's own programs.
func wineComm(comm string) bool {
	c := strings.ToLower(comm)
	return strings.HasSuffix(c, ".exe") || strings.HasPrefix(c, "wine")
}

func timevalDuration(tv unix.Timeval) time.Duration {
	return time.Duration(tv.Sec)*time.Second + time.Duration(tv.Usec)*time.Microsecond
}
