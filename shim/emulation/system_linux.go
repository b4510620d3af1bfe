//go:build linux

package emulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

const (
	// serverStartTimeout bounds how long Start waits for the wineserver's
	// socket.
	serverStartTimeout = 10 * time.Second
	// monitorInterval is how often a stopping (or opened) system scans its
	// silo.
	monitorInterval = 100 * time.Millisecond
	// shutdownServerGrace is how long the wineserver has to exit after
	// SIGTERM in a shutdown before it is killed.
	shutdownServerGrace = 5 * time.Second
	// closeWait bounds how long Close waits for a terminated system to
	// stop before it tears it down.
	closeWait = 10 * time.Second
)

type phase int

const (
	phaseCreated phase = iota
	phaseRunning
	phaseStopping
	phaseStopped
)

// system is one compute system: a Wine silo.
type system struct {
	b      *Backend
	id     string
	dir    string
	prefix string
	cdir   string
	// opened is set for a system attached by Open: its wineserver is not
	// this process's child.
	opened bool

	done        chan struct{} // closed when the system has stopped
	wake        chan struct{} // pokes the monitor
	monitorStop chan struct{}
	monitorDone chan struct{} // nil until the monitor starts

	mu        sync.Mutex
	st        *persisted
	phase     phase
	stopAsked bool // Shutdown or Terminate was called
	terminate bool // Terminate was called
	closed    bool
	exitErr   error
	started   time.Time
	// The wineserver, when this process started it.
	server       *exec.Cmd
	serverExited chan struct{}
	serverOutput *tailBuffer
	// serverErr is the wineserver's exit, set before serverExited closes.
	serverErr error
	// CPU time of the silo's processes that ended and were reaped here.
	cpuUser, cpuKernel time.Duration
	commitPeak         uint64
	// lastStats is the last sample Stats took (statsReuse).
	lastStats *compute.Stats
}

var _ compute.System = (*system)(nil)

func newSystem(b *Backend, id, dir string, st *persisted, opened bool) *system {
	return &system{
		b:           b,
		id:          id,
		dir:         dir,
		prefix:      filepath.Join(dir, prefixDir),
		cdir:        filepath.Join(dir, cDir),
		opened:      opened,
		st:          st,
		done:        make(chan struct{}),
		wake:        make(chan struct{}, 1),
		monitorStop: make(chan struct{}),
	}
}

func (s *system) ID() string { return s.id }

func (s *system) Wait() <-chan struct{} { return s.done }

func (s *system) ExitError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// gone is the error of a system that has stopped or been closed.
func (s *system) gone() error {
	return fmt.Errorf("emulation: system %s has stopped: %w", s.id, errdefs.ErrNotFound)
}

// usableLocked checks that the system can still be acted on.
func (s *system) usableLocked() error {
	if s.closed || s.phase == phaseStopped {
		return s.gone()
	}
	return nil
}

// finish marks the system stopped with err (nil for a requested stop) and
// closes Wait.
func (s *system) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishLocked(err)
}

func (s *system) finishLocked(err error) {
	if s.phase == phaseStopped {
		return
	}
	s.phase = phaseStopped
	if s.stopAsked {
		err = nil
	}
	s.exitErr = err
	close(s.done)
}

func (s *system) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *system) addCPU(user, kernel time.Duration) {
	s.mu.Lock()
	s.cpuUser += user
	s.cpuKernel += kernel
	s.mu.Unlock()
}

// Start starts the system's wineserver, in the foreground (-f) and
// persistent (-p: it does not exit when its last client does) as a child of
// this process, and waits until it listens on its socket.
func (s *system) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if s.phase != phaseCreated || s.opened {
		return fmt.Errorf("emulation: system %s is already started: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	out := &tailBuffer{max: 4096}
	cmd := exec.Command(s.b.wineserver, "-f", "-p")
	cmd.Env = append(baseEnv(), wineEnv(s.prefix)...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.startProcess(cmd, true); err != nil {
		err = fmt.Errorf("emulation: start wineserver: %w", err)
		s.finishLocked(err)
		return err
	}
	exited := make(chan struct{})
	s.server, s.serverExited, s.serverOutput = cmd, exited, out
	// The server's waiter: owned by the system, it ends when the server
	// does (Terminate, Shutdown, Remove, or a crash).
	// It must not take s.mu, which Start holds while it waits for the
	// server: serverErr is written before exited is closed and read only
	// after.
	go func() {
		err := cmd.Wait()
		s.b.reaper.waited(cmd.Process.Pid)
		s.serverErr = err
		close(exited)
	}()

	serverDir, err := waitServer(ctx, cmd.Process.Pid, exited)
	if err != nil {
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("emulation: system %s: wineserver: %w (%v)%s", s.id, err, s.serverErr, out.suffix())
		s.finishLocked(err)
		return err
	}
	now := time.Now()
	s.started = now
	s.st.Started = &now
	s.st.ServerPID = cmd.Process.Pid
	if pst, err := readStat(cmd.Process.Pid); err == nil {
		s.st.ServerStart = pst.start
	}
	s.st.ServerDir = serverDir
	if err := s.boot(ctx); err != nil {
		cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("emulation: system %s: %w", s.id, err)
		s.finishLocked(err)
		return err
	}
	if err := saveState(s.dir, s.st); err != nil {
		cmd.Process.Kill()
		<-exited
		s.finishLocked(err)
		return err
	}
	s.phase = phaseRunning
	s.startMonitor(exited)
	return nil
}

// startProcess starts cmd as a process of the silo: in its cgroups and its
// network namespace, bound to its processors. Wine's own processes (the wineserver, wineboot and the
// system processes it starts) stay out of the memory cgroup, which bounds
// the container's processes (limits_linux.go).
func (s *system) startProcess(cmd *exec.Cmd, wineOwn bool) error {
	limits := s.st.LimitCgroups
	if wineOwn && limits["memory"] != "" {
		limits = maps.Clone(limits)
		delete(limits, "memory")
	}
	start := func() error {
		return withAffinity(s.st.Resources.CPUAffinity, func() error {
			return inLimitCgroups(limits, func() error { return startIn(s.st.Cgroup, cmd, s.b.reaper.start) })
		})
	}
	if s.st.NetNS == "" {
		return start()
	}
	// The process is forked from a thread locked inside the namespace, so
	// it is born there; the shim's other threads stay where they are.
	return ns.WithNetNSPath(s.st.NetNS, func(ns.NetNS) error { return start() })
}

// bootLog is the file, in the system's directory, that holds the boot
// process's output.
const bootLog = "boot.log"

// bootProgram is the silo's first process: Wine's hostname.exe, by its path
// in the template prefix (an image's own System32 may shadow it on C:).
const bootProgram = "drive_c/windows/system32/hostname.exe"

// boot starts the silo's first process and returns once Wine's boot is
// under way, as a Windows silo starts its system processes when it starts.
// The first process of a wineserver starts wineboot, which starts
// services.exe and the services it runs, and they inherit its stderr: were
// that a container process's, they would hold its output open until the
// silo ends, and its Wait would end only at outputDrainTimeout. So a
// process of the emulation's own is first, with its output in a file (a
// pipe would stay open as long as they run). Later processes find the boot
// under way and wait for it inside Wine, so boot waits only until wineboot
// runs (or the first process has ended), not for the boot to finish.
func (s *system) boot(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	logPath := filepath.Join(s.dir, bootLog)
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	env, _ := processEnv(nil, s.prefix)
	cmd := exec.Command(s.b.setarch, "-R", s.b.wine, filepath.Join(s.b.template, bootProgram))
	cmd.Env, cmd.Dir = env, s.cdir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.startProcess(cmd, true); err != nil {
		return fmt.Errorf("start the boot process: %w", err)
	}
	// Its waiter, owned by the system: it ends with the process, in a
	// moment, or when the silo is terminated.
	ended := make(chan struct{})
	go func() {
		if err := cmd.Wait(); err != nil {
			b, _ := os.ReadFile(logPath)
			log.L.WithError(err).WithFields(log.Fields{"system": s.id, "output": string(bytes.TrimSpace(b))}).Warn("emulation: the silo's boot process failed")
		}
		s.b.reaper.waited(cmd.Process.Pid)
		close(ended)
	}()
	for {
		procs, err := s.processes()
		if err != nil {
			return err
		}
		for _, p := range procs {
			if p.comm == "wineboot.exe" {
				return nil
			}
		}
		select {
		case <-ended:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("Wine's boot did not start within %v", serverStartTimeout)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitServer waits until the wineserver pid listens: it has moved into its
// socket directory (/tmp/.wine-<uid>/server-<dev>-<inode> upstream; Debian
// puts it under a directory named in the prefix's wineserver file) and
// created the socket there. It returns the directory.
func waitServer(ctx context.Context, pid int, exited <-chan struct{}) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	for {
		if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err == nil && serverDirName.MatchString(filepath.Base(cwd)) {
			if fi, err := os.Stat(filepath.Join(cwd, "socket")); err == nil && fi.Mode()&os.ModeSocket != 0 {
				return cwd, nil
			}
		}
		select {
		case <-exited:
			return "", fmt.Errorf("exited at start")
		case <-ctx.Done():
			return "", fmt.Errorf("no socket after %v: %w", serverStartTimeout, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startMonitor starts the goroutine that watches the silo until it has
// stopped; s.mu is held. exited is the owned wineserver's exit, nil for an
// opened system.
func (s *system) startMonitor(exited <-chan struct{}) {
	s.monitorDone = make(chan struct{})
	go s.monitor(exited)
}

// monitor is the system's watcher, owned by the system: it ends when the
// system has stopped (it closes Wait) or at Close. While the system runs
// with its own wineserver it sleeps until the server exits or a stop is
// asked; otherwise it scans the silo every monitorInterval.
func (s *system) monitor(exited <-chan struct{}) {
	defer close(s.monitorDone)
	owned := exited != nil
	serverGone := false
	var termAt time.Time
	for {
		s.mu.Lock()
		stopping := s.stopAsked
		s.mu.Unlock()
		var tick <-chan time.Time
		if stopping || !owned || serverGone {
			tick = time.After(monitorInterval)
		}
		select {
		case <-s.monitorStop:
			return
		case <-s.wake:
		case <-exited:
			serverGone, exited = true, nil
		case <-tick:
		}
		if s.check(owned, serverGone, &termAt) {
			return
		}
	}
}

// processes returns the silo's running processes, the wineserver
// included.
func (s *system) processes() ([]procStat, error) { return siloMembers(s.st.Cgroup, s.prefix) }

// isServer reports whether p is the system's wineserver.
func (s *system) isServer(p procStat) bool {
	if s.st.ServerPID != 0 {
		return p.pid == s.st.ServerPID && (s.st.ServerStart == 0 || p.start == s.st.ServerStart)
	}
	return strings.HasPrefix(p.comm, "wineserver")
}

// check scans the silo once and acts: it reports whether the system has
// stopped.
func (s *system) check(owned, serverGone bool, termAt *time.Time) bool {
	procs, err := s.processes()
	if err != nil {
		return false
	}
	s.mu.Lock()
	terminate, stopAsked := s.terminate, s.stopAsked
	var server *procStat
	var others []procStat
	for _, p := range procs {
		if s.isServer(p) {
			server = &p
		} else {
			others = append(others, p)
		}
	}
	s.mu.Unlock()
	alive := server != nil
	if owned {
		alive = !serverGone
	}

	switch {
	case !alive:
		// Without their server Wine processes die; make sure.
		for _, p := range others {
			signalProc(p, unix.SIGKILL)
		}
		if len(others) == 0 {
			s.finish(s.lostError())
			return true
		}
	case terminate:
		if server != nil {
			signalProc(*server, unix.SIGKILL)
		}
		for _, p := range others {
			signalProc(p, unix.SIGKILL)
		}
	case stopAsked:
		for _, p := range others {
			if !isWineSystemProcess(p.pid) {
				return false // still shutting down
			}
		}
		// Only Wine's own processes are left: stop the server, which
		// ends them. SIGTERM lets it save the registry; it is killed if
		// it takes too long.
		if server != nil {
			if termAt.IsZero() {
				signalProc(*server, unix.SIGTERM)
				*termAt = time.Now()
			} else if time.Since(*termAt) > shutdownServerGrace {
				signalProc(*server, unix.SIGKILL)
			}
		}
	}
	return false
}

// lostError is the ExitError of a system that stopped without being asked;
// for an owned server it is called once the server has exited.
func (s *system) lostError() error {
	if s.opened {
		return fmt.Errorf("emulation: system %s: its processes ended", s.id)
	}
	s.mu.Lock()
	out := s.serverOutput
	s.mu.Unlock()
	return fmt.Errorf("emulation: system %s: the wineserver exited unexpectedly (%v)%s", s.id, s.serverErr, out.suffix())
}

// Shutdown sends every process of the silo except the wineserver and
// Wine's own system processes the closest thing Wine has to
// CTRL_SHUTDOWN_EVENT: SIGINT, which Wine delivers to console control
// handlers as CTRL_C_EVENT (Wine cannot deliver CTRL_SHUTDOWN_EVENT). It
// does not wait: once those processes have exited, the monitor stops the
// wineserver (SIGTERM, then SIGKILL after 5 s), which ends Wine's system
// processes, and Wait closes. A process that ignores the event keeps the
// system running until Terminate.
func (s *system) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.stopAsked = true
	if s.phase == phaseCreated {
		s.finishLocked(nil)
		s.mu.Unlock()
		return nil
	}
	terminating := s.terminate
	s.phase = phaseStopping
	s.mu.Unlock()
	if !terminating {
		procs, err := s.processes()
		if err != nil {
			return err
		}
		for _, p := range procs {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !s.isServer(p) && !isWineSystemProcess(p.pid) {
				signalProc(p, unix.SIGINT)
			}
		}
	}
	s.poke()
	return nil
}

// Terminate SIGKILLs the wineserver and every process of the silo; the
// monitor repeats that until none is left, then closes Wait. (The
// wineserver is killed directly rather than with `wineserver -k`, which is
// itself a client of the server and would hang on a wedged one; the
// registry the server would save on a clean exit is thrown away with the
// prefix anyway.)
func (s *system) Terminate(ctx context.Context) error {
	s.mu.Lock()
	if err := s.usableLocked(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.stopAsked, s.terminate = true, true
	if s.phase == phaseCreated {
		s.finishLocked(nil)
		s.mu.Unlock()
		return nil
	}
	s.phase = phaseStopping
	s.mu.Unlock()
	if s.st.Cgroup != "" {
		// Everything in the silo at once, as a job object's termination.
		if err := killCgroup(s.st.Cgroup); err != nil {
			return err
		}
		s.poke()
		return nil
	}
	procs, err := s.processes()
	if err != nil {
		return err
	}
	for _, p := range procs {
		if s.isServer(p) {
			signalProc(p, unix.SIGKILL)
		}
	}
	for _, p := range procs {
		signalProc(p, unix.SIGKILL)
	}
	s.poke()
	return nil
}

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
// running process's commit limit but Wine's own. A limit this machine
// cannot enforce (no controller, storage QoS) is ErrNotSupported. CPU
// affinity binds every process of the silo; an update of the affinity
// alone leaves the limits as they are.
func (s *system) Modify(ctx context.Context, r compute.Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if limits := (compute.Resources{CPUAffinity: r.CPUAffinity}); len(r.CPUAffinity) > 0 && reflect.DeepEqual(r, limits) {
		return s.setAffinityLocked(r.CPUAffinity)
	}
	if !resourcesSet(r) && len(s.st.LimitCgroups) == 0 {
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
	if err := applyLimits(r, s.st.LimitCgroups, s.b.HostCPUs()); err != nil {
		return fmt.Errorf("emulation: system %s: %w", s.id, err)
	}
	// A running process's commit limit follows, but for Wine's own; the
	// affinity binds all of them, as a job object's.
	procs, err := s.processes()
	if err != nil {
		return err
	}
	for _, p := range procs {
		if !s.isServer(p) && !isWineSystemProcess(p.pid) {
			if err := limitCommit(p.pid, r.MemoryLimitBytes); err != nil {
				return fmt.Errorf("emulation: system %s: %w", s.id, err)
			}
		}
	}
	a := r.CPUAffinity
	r.CPUAffinity = s.st.Resources.CPUAffinity
	s.st.Resources = r
	if len(a) > 0 {
		// Saves the state too.
		return s.setAffinityLocked(a)
	}
	return saveState(s.dir, s.st)
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

// Close releases the system. A system that has stopped, or that was
// terminated (Close then waits up to 10 s for its processes to go), is torn
// down: its mounts are unmounted and Root/<id> is removed. A system still
// running is left running, reachable with Open.
func (s *system) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	terminated := s.terminate
	s.mu.Unlock()
	if terminated {
		select {
		case <-s.done:
		case <-time.After(closeWait):
		}
	}
	close(s.monitorStop)
	if s.monitorDone != nil {
		<-s.monitorDone
	}
	var err error
	select {
	case <-s.done:
		s.mu.Lock()
		st := s.st
		s.mu.Unlock()
		err = teardown(context.Background(), s.dir, st)
	default:
	}
	s.b.forget(s)
	return err
}

// baseEnv is the Unix environment Wine itself needs (not passed to Windows
// programs: Wine ignores PATH and HOME there).
func baseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/root"
	}
	return []string{"PATH=" + path, "HOME=" + home}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// suffix is ": <output>" for an error message, or "".
func (t *tailBuffer) suffix() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := string(bytes.TrimSpace(t.b))
	if out == "" {
		return ""
	}
	return ": " + out
}
