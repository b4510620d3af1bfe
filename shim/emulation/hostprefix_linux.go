//go:build linux

package emulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/record"
)

// The host prefix. On Windows a HostProcess container's processes run on
// the host itself, in a job object of the container's own: the host's
// registry, object namespace, files and network. In the emulation the
// HostProcess containers of a Backend's root all run in one Wine prefix,
// the host prefix, served by one wineserver. Root/.hostprocess/ holds
//
//	state.json      its wineserver (pid, start time, socket directory),
//	                its cgroup and its mount, as a silo's state.json
//	prefix/         an overlay mount of the template prefix, with
//	                prefix-upper/ and prefix-work/: its drive_c is the
//	                host's system drive C:, shared by the containers
//	                (their rootfs are mounted at C:\hpc\<id>); Z: is the
//	                machine's /
//	users/          an empty file per HostProcess container using it
//	wineserver.log  its wineserver's output
//
// (".hostprocess" is no valid system id.) The wineserver and Wine's own
// processes (wineboot, services.exe, ...) run in a cgroup of the host
// prefix, outside every container's, so that no container's Terminate
// reaches them.
//
// Shims are separate processes, one per pod, and any of them may make,
// join or remove the host prefix: they do it holding an flock on Root
// (lockHost). The first HostProcess container's Create makes the host
// prefix and starts its wineserver, a child of that shim in a process
// group of its own, which outlives the shim; later ones join it. A
// container's teardown (Close once it stopped, or Remove) leaves it, and
// the last one removes it: it kills the host prefix's cgroup (the
// wineserver and Wine's processes), unmounts it and removes
// Root/.hostprocess, so nothing is left once the node runs no HostProcess
// container. A user whose Root/<id> is gone does not keep it. A host prefix
// whose wineserver died is replaced by the next Create.

const (
	hostDirName   = ".hostprocess"
	hostUsersDir  = "users"
	hostServerLog = "wineserver.log"
	// hostMountRoot is C:\hpc, below which a HostProcess container's
	// rootfs is mounted (runhcs's place without the bind filter).
	hostMountRoot = "hpc"
	// hostLockTimeout bounds the wait for another shim's work on the
	// host prefix (making it starts a wineserver and boots Wine).
	hostLockTimeout = 30 * time.Second
)

func (b *Backend) hostDir() string { return filepath.Join(b.root, hostDirName) }

// hostPrefix is the host prefix's Wine prefix.
func (b *Backend) hostPrefix() string { return filepath.Join(b.hostDir(), prefixDir) }

// hostDrive is the Linux directory of the host prefix's C:.
func (b *Backend) hostDrive() string { return filepath.Join(b.hostPrefix(), "drive_c") }

// lockHost takes the lock on the host prefix, an flock on Root held until
// unlock: every shim of the node opens the same directory.
func (b *Backend) lockHost(ctx context.Context) (unlock func(), err error) {
	fd, err := unix.Open(b.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("emulation: lock the host prefix: open %s: %w", b.root, err)
	}
	ctx, cancel := context.WithTimeout(ctx, hostLockTimeout)
	defer cancel()
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			// Closing the descriptor releases the lock.
			return func() { unix.Close(fd) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			unix.Close(fd)
			return nil, fmt.Errorf("emulation: lock the host prefix: %w", err)
		}
		select {
		case <-ctx.Done():
			unix.Close(fd)
			return nil, fmt.Errorf("emulation: lock the host prefix (%s): another shim holds it: %w", b.root, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// joinHost makes sure the host prefix runs, making it (again) when it does
// not, and registers the container id as its user. It returns the host
// prefix's state. The lock is held.
func (b *Backend) joinHost(ctx context.Context, id string) (*persisted, error) {
	dir := b.hostDir()
	st, err := loadState(dir)
	if err != nil || !processAlive(st.ServerPID, st.ServerStart) {
		// None yet, a creation cut short, or a wineserver that died
		// (its containers stopped with it).
		if err == nil {
			log.G(ctx).WithField("wineserver", st.ServerPID).Warn("emulation: the host prefix's wineserver has gone; making the host prefix again")
		} else {
			st = nil
		}
		if err := b.removeHost(ctx, st); err != nil {
			return nil, err
		}
		if st, err = b.makeHost(ctx); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, hostUsersDir, id), nil, 0o600); err != nil {
		return nil, fmt.Errorf("emulation: join the host prefix: %w", err)
	}
	return st, nil
}

// leaveHost unregisters the container id; when no user is left it removes
// the host prefix. A user whose Root/<id> is gone is dropped. The lock is
// held.
func (b *Backend) leaveHost(ctx context.Context, id string) error {
	dir := b.hostDir()
	users := filepath.Join(dir, hostUsersDir)
	if err := os.Remove(filepath.Join(users, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emulation: leave the host prefix: %w", err)
	}
	entries, err := os.ReadDir(users)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("emulation: the host prefix's users: %w", err)
	}
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(b.root, e.Name())); err == nil {
			return nil
		}
		os.Remove(filepath.Join(users, e.Name()))
	}
	st, err := loadState(dir)
	if err != nil {
		st = nil
	}
	return b.removeHost(ctx, st)
}

// makeHost makes the host prefix and starts its wineserver, and returns
// its state; on failure it undoes what it did. The lock is held.
func (b *Backend) makeHost(ctx context.Context) (_ *persisted, retErr error) {
	dir := b.hostDir()
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	st := &persisted{Version: stateVersion, ID: hostDirName, TemplatePrefix: b.template, Cgroup: b.cgroups.siloOf(dir)}
	defer func() {
		if retErr != nil {
			if err := b.removeHost(context.Background(), st); err != nil {
				retErr = fmt.Errorf("%w (and rolling back: %v)", retErr, err)
			}
		}
	}()
	if err := makeCgroup(st.Cgroup); err != nil {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	for _, d := range []string{prefixUpper, prefixWork, prefixDir, hostUsersDir} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("emulation: host prefix: %w", err)
		}
	}
	if err := saveState(dir, st); err != nil {
		return nil, err
	}
	prefix := b.hostPrefix()
	if err := mountOverlay(prefix, []string{b.template}, filepath.Join(dir, prefixUpper), filepath.Join(dir, prefixWork)); err != nil {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	st.Mounts = append(st.Mounts, prefix)
	if err := saveState(dir, st); err != nil {
		return nil, err
	}
	// C: is the prefix's own drive_c, whatever the template says.
	link := filepath.Join(prefix, "dosdevices", "c:")
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	if err := os.Symlink(filepath.Join("..", "drive_c"), link); err != nil {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(b.hostDrive(), hostMountRoot), 0o755); err != nil {
		return nil, fmt.Errorf("emulation: host prefix: %w", err)
	}
	if err := b.startHostServer(ctx, st); err != nil {
		return nil, err
	}
	return st, nil
}

// startHostServer starts the host prefix's wineserver in its cgroup,
// waits for its socket, boots Wine there and records the server in st.
func (b *Backend) startHostServer(ctx context.Context, st *persisted) error {
	dir, prefix := b.hostDir(), b.hostPrefix()
	logPath := filepath.Join(dir, hostServerLog)
	out, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("emulation: host prefix: %w", err)
	}
	defer out.Close()
	cmd := b.wineserverCommand(prefix, dir)
	cmd.Stdout, cmd.Stderr = out, out
	start := func(cmd *exec.Cmd) error { return startIn(st.Cgroup, cmd, b.reaper.start) }
	if err := start(cmd); err != nil {
		return fmt.Errorf("emulation: start the host prefix's wineserver: %w", err)
	}
	// Its waiter: it ends with the server, when the last HostProcess
	// container removes the host prefix (from whichever shim) or the
	// server fails.
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		b.reaper.waited(cmd.Process.Pid)
		log.L.WithError(err).Debug("emulation: the host prefix's wineserver exited")
		close(exited)
	}()
	serverDir, err := waitServer(ctx, cmd.Process.Pid, exited)
	if err != nil {
		cmd.Process.Kill()
		<-exited
		output, _ := os.ReadFile(logPath)
		return fmt.Errorf("emulation: the host prefix's wineserver: %w: %s", err, bytes.TrimSpace(output))
	}
	now := time.Now()
	st.Started, st.ServerPID, st.ServerDir = &now, cmd.Process.Pid, serverDir
	if pst, err := readStat(cmd.Process.Pid); err == nil {
		st.ServerStart = pst.start
	}
	if err := saveState(dir, st); err != nil {
		return err
	}
	err = b.boot(ctx, bootTarget{
		who: "the host prefix", dir: dir, prefix: prefix, cdir: b.hostDrive(),
		start:   start,
		members: func() ([]procStat, error) { return siloMembers(st.Cgroup, prefix) },
	})
	if err != nil {
		return fmt.Errorf("emulation: the host prefix: %w", err)
	}
	return nil
}

// removeHost kills the host prefix's processes, unmounts it and removes
// Root/.hostprocess. st is its state, nil when unreadable (its cgroup is
// then found by its name). A missing host prefix is not an error.
func (b *Backend) removeHost(ctx context.Context, st *persisted) error {
	dir := b.hostDir()
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if st == nil {
		st = &persisted{ID: hostDirName}
		if b.cgroups != nil {
			if c := b.cgroups.siloOf(dir); isDir(c) == nil {
				st.Cgroup = c
			}
		}
	}
	if err := killSilo(ctx, st.Cgroup, b.hostPrefix()); err != nil {
		return fmt.Errorf("emulation: remove the host prefix: %w", err)
	}
	if err := teardown(ctx, dir, st); err != nil {
		return fmt.Errorf("emulation: remove the host prefix: %w", err)
	}
	b.reaper.poke()
	return nil
}

// processAlive reports whether the process of pid and start time start
// (clock ticks after boot), a wineserver or a shim, still runs.
func processAlive(pid int, start uint64) bool {
	return record.Alive(record.Shim{PID: pid, Start: start})
}
