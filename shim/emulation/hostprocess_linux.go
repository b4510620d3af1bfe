//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
)

// A HostProcess container (compute.Settings.HostProcess) has no silo: its
// processes run in the host prefix (hostprefix_linux.go), with the
// machine's network namespace, and in a cgroup of the container's own
// (cgroup v2 for membership, cgroup.kill and CPU time; the v1 limit cgroups
// as a silo's), which is what its job object is on Windows. Its rootfs, an
// overlay of its layers' Files with the scratch on top (no template below:
// the host's files are the host prefix's), is mounted at its mount point
// C:\hpc\<id> of the host prefix. Root/<id> holds only its state.json.

// hostProcessState is what a HostProcess container's state.json adds.
type hostProcessState struct {
	// MountPoint is the Linux directory of its mount point, C:\hpc\<id>
	// of the host prefix.
	MountPoint string `json:"mountPoint"`
	// InheritUser is Settings.HostProcess.InheritUser.
	InheritUser bool `json:"inheritUser,omitempty"`
	// ServerPID and ServerStart are the host prefix's wineserver the
	// container joined: it stops when that server does.
	ServerPID   int    `json:"wineserverPid"`
	ServerStart uint64 `json:"wineserverStart"`
	// Users are the accounts its processes were started as
	// (ProcessSettings.User). Wine has no accounts: every process runs as
	// the shim's Linux user, whatever they say.
	Users []string `json:"users,omitempty"`
}

// hostMountPoint is the Linux directory of the container id's mount point.
func (b *Backend) hostMountPoint(id string) string {
	return filepath.Join(b.hostDrive(), hostMountRoot, id)
}

// mountPointComps are the components below C: of the container id's mount
// point; winJoin makes them C:\hpc\<id>.
func mountPointComps(id string) []string { return []string{hostMountRoot, id} }

// mountHostProcess joins the host prefix and mounts the container's rootfs
// at its mount point, then binds the mapped directories below it,
// recording every mount in state.json as it is made.
//
// A mapped directory appears only below the mount point, as runhcs places
// it without the bind filter (C:\data at C:\hpc\<id>\data): the host's C: is
// every HostProcess container's, so a binding at the container path itself
// would show in all of them, and two containers mapping one path would
// collide.
func (b *Backend) mountHostProcess(ctx context.Context, dir string, st *persisted, rootfs overlay) error {
	unlock, err := b.lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	host, err := b.joinHost(ctx, st.ID)
	if err != nil {
		return err
	}
	st.HostProcess.ServerPID, st.HostProcess.ServerStart = host.ServerPID, host.ServerStart
	if err := saveState(dir, st); err != nil {
		return err
	}
	mp := b.hostMountPoint(st.ID)
	// What a container of this id left here (its shim died, and its
	// Root/<id> went without a teardown) goes first.
	if err := unmountAll(ctx, mp); err != nil {
		return fmt.Errorf("emulation: mount point: %w", err)
	}
	if err := os.Mkdir(mp, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("emulation: mount point: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	mounted := func(p string) error {
		st.Mounts = append(st.Mounts, p)
		return saveState(dir, st)
	}
	if err := mountOverlay(mp, rootfs.lowers, rootfs.upper, rootfs.work); err != nil {
		return fmt.Errorf("emulation: rootfs: %w", err)
	}
	if err := mounted(mp); err != nil {
		return err
	}
	return bindMapped(ctx, mp, st.Mapped, mounted)
}

// leaveHostProcess is a HostProcess container's teardown in the host
// prefix: it kills the container's processes (its cgroup), unmounts its
// rootfs and mapped directories, removes its mount point and leaves the
// host prefix, which goes with its last user.
func (b *Backend) leaveHostProcess(ctx context.Context, id string, st *persisted) error {
	if st.Cgroup != "" {
		if err := removeCgroup(ctx, st.Cgroup); err != nil {
			return fmt.Errorf("emulation: system %s: %w", id, err)
		}
	}
	unlock, err := b.lockHost(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// The mount point is found by the id, never taken from state.json.
	mp := b.hostMountPoint(id)
	if err := unmountAll(ctx, mp); err != nil {
		return fmt.Errorf("emulation: system %s: %w", id, err)
	}
	if err := os.Remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emulation: system %s: remove its mount point: %w", id, err)
	}
	return b.leaveHost(ctx, id)
}

// startHostProcessLocked is Start of a HostProcess container: there is no
// wineserver of its own to start, only the host prefix's to find running.
// s.mu is held.
func (s *system) startHostProcessLocked() error {
	if err := s.hostServerGone(); err != nil {
		s.finishLocked(err)
		return err
	}
	now := time.Now()
	s.started, s.st.Started = now, &now
	if err := saveState(s.dir, s.st); err != nil {
		s.finishLocked(err)
		return err
	}
	s.phase = phaseRunning
	s.startMonitor(nil)
	return nil
}

// hostServerGone is the error of a HostProcess container whose wineserver,
// the host prefix's it joined, has gone (a process started now would start a
// wineserver of its own), nil while it runs.
func (s *system) hostServerGone() error {
	hp := s.st.HostProcess
	if processAlive(hp.ServerPID, hp.ServerStart) {
		return nil
	}
	return fmt.Errorf("emulation: HostProcess container %s: the host prefix's wineserver (pid %d) has gone: %w", s.id, hp.ServerPID, errdefs.ErrUnavailable)
}

// hostProcessArgs is what CreateProcess starts for a process of a
// HostProcess container, by the rules both HostProcess backends follow
// (shim/hostprocess): the command line with the mount point variable
// expanded, the working directory ("" and a relative one below the mount
// point) and the user it asked for (hostProcessUser).
func (s *system) hostProcessArgs(p *compute.ProcessSettings) (commandLine, wd, user string, err error) {
	user, err = hostProcessUser(p.User, s.st.HostProcess.InheritUser)
	if err != nil {
		return "", "", "", err
	}
	mp := winJoin(mountPointComps(s.id))
	return hostprocess.ExpandMountPoint(p.CommandLine, mp), hostprocess.WorkingDirectory(p.WorkingDirectory, mp), user, nil
}

// hostProcessReadyLocked is the last check before a process of the
// container starts: its wineserver must run (else Wine would start one of
// the process's own). It records the account the process asked for. s.mu is
// held.
func (s *system) hostProcessReadyLocked(ctx context.Context, user string) error {
	if err := s.hostServerGone(); err != nil {
		return err
	}
	hp := s.st.HostProcess
	if user == "" || slices.Contains(hp.Users, user) {
		return nil
	}
	log.G(ctx).WithFields(log.Fields{"system": s.id, "user": user}).Info("emulation: a HostProcess process runs as the shim's user: Wine has no accounts")
	hp.Users = append(hp.Users, user)
	return saveState(s.dir, s.st)
}

// hostProcessUser checks the account a HostProcess process runs as
// (hostprocess.ParseAccount) and returns the name recorded: Windows'
// spelling of a well-known account, any other as written. With inherit
// (the shim's own account) any is taken as it is.
func hostProcessUser(user string, inherit bool) (string, error) {
	if inherit {
		return strings.TrimSpace(user), nil
	}
	a, err := hostprocess.ParseAccount(user)
	if err != nil {
		return "", fmt.Errorf("emulation: %w", err)
	}
	return a.String(), nil
}

// hostProcessEnv is the environment a HostProcess process asks for, for
// processEnv: hostprocess.Environment of the spec's entries, whose PATH
// (the mount point in front) processEnv hands Wine as WINEPATH, in front of
// the prefix's own PATH.
//
// Its base is what Wine gives every process of the host prefix, not a
// profile passed here: the variables of the prefix's registry (PATH,
// SystemRoot, ProgramFiles, ...) and those of the prefix's one user, named
// after the shim's Linux user (USERNAME, USERPROFILE=C:\users\<name>,
// APPDATA, ...). Wine has no other accounts, so no profile of the user
// asked for.
func hostProcessEnv(spec []string, mountPoint string) []string {
	return hostprocess.Environment(nil, spec, mountPoint, wineWindowsDir)
}

// hostProcessProgram finds the program of a HostProcess process's command
// line as the HostProcess backend on Windows does
// (hostprocess.ResolveProgram: the mount point first, CreateProcess's
// rules for the extension and for unquoted spaces) in the host prefix's
// C: drive, and returns its path in the case found on disk and the
// arguments Wine passes it. cwd is the working directory's components
// below C:, winPath the process's Windows PATH.
func (s *system) hostProcessProgram(commandLine string, cwd []string, winPath string) (program string, args []string, err error) {
	mp, dir := winJoin(mountPointComps(s.id)), winJoin(cwd)
	search := hostprocess.SearchPath(mp, dir, wineWindowsDir, winPath)
	prog, err := hostprocess.ResolveProgram(commandLine, mp, dir, search, func(p string) bool {
		_, ok := s.winFile(p)
		return ok
	})
	if err != nil {
		return "", nil, err
	}
	program, _ = s.winFile(prog.Path)
	return program, wincmdline.SplitCommandLine(prog.CommandLine)[1:], nil
}

// winFile is the Windows path p names on the system's C: drive in the case
// found on disk, and whether it is a file.
func (s *system) winFile(p string) (string, bool) {
	comps, err := cPath(p)
	if err != nil {
		return "", false
	}
	real, err := resolve(s.cdir, comps)
	if err != nil {
		return "", false
	}
	return winJoin(real), isFile(filepath.Join(append([]string{s.cdir}, real...)...))
}

// watchHostProcess is a HostProcess container's watcher, owned by the
// system: it ends when the system has stopped (it closes Wait) or at
// Close. It checks the container when its cgroup's populated state changes
// (an inotify watch on cgroup.events) and when its wineserver exits (a
// pidfd), so a running container costs nothing, when poked, and while
// stopping every monitorInterval.
func (s *system) watchHostProcess() {
	defer close(s.monitorDone)
	hp := s.st.HostProcess
	var changed, serverExit <-chan struct{}
	events, err := watchCgroupEvents(s.st.Cgroup)
	if err == nil {
		defer events.close()
		changed = events.C
		var server *exitWatch
		if server, err = watchExit(hp.ServerPID, hp.ServerStart); err == nil {
			defer server.close()
			serverExit = server.C
		}
	}
	if err != nil {
		log.L.WithError(err).WithField("system", s.id).Warn("emulation: HostProcess container not watched; polling it")
	}
	for {
		// A check first: the last process may have gone before the
		// watches began.
		if s.checkHostProcess() {
			return
		}
		s.mu.Lock()
		stopping := s.stopAsked
		s.mu.Unlock()
		var tick <-chan time.Time
		if stopping || err != nil {
			tick = time.After(monitorInterval)
		}
		select {
		case <-s.monitorStop:
			return
		case <-s.wake:
		case <-changed:
		case <-serverExit:
			serverExit = nil
		case <-tick:
		}
	}
}

// checkHostProcess looks at the container's processes once and acts; it
// reports whether the system has stopped. The container stops when no
// process is left after one ran (as a job object's last process ends it),
// after Shutdown or Terminate, or with its wineserver (an error). Terminate,
// a Shutdown that left only Wine's own processes (a console's conhost.exe),
// and the wineserver's end kill the cgroup.
func (s *system) checkHostProcess() bool {
	// Under the lock, so that no CreateProcess starts a process between
	// the look and the stop.
	s.mu.Lock()
	defer s.mu.Unlock()
	procs, err := s.processes()
	if err != nil {
		return false
	}
	lost := s.hostServerGone()
	if len(procs) == 0 {
		if !s.ran && !s.stopAsked && lost == nil {
			return false
		}
		s.finishLocked(lost)
		return true
	}
	kill := s.terminate || lost != nil
	if s.stopAsked && !kill {
		kill = true
		for _, p := range procs {
			if !isWineSystemProcess(p.pid) {
				kill = false
			}
		}
	}
	if kill {
		if err := killCgroup(s.st.Cgroup); err != nil {
			log.L.WithError(err).WithField("system", s.id).Warn("emulation: kill a HostProcess container's processes")
		}
	}
	return false
}
