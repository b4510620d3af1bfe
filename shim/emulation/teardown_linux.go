//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Remove is the cleanup of last resort for the shim's delete subcommand:
// it kills every process of the system id (found by its cgroup, or its
// WINEPREFIX), unmounts everything below Root/<id> (and a HostProcess
// container's rootfs at its mount point) and removes that directory. It needs
// no state.json and no open System, so it also cleans up after a shim that
// died in the middle of Create. A missing system is not an error. Do not
// use the system through an open System afterwards.
//
// The equivalent through the compute interface is Open, Terminate, waiting
// for Wait, and Close.
func (b *Backend) Remove(ctx context.Context, id string) error {
	dir, err := b.dir(id)
	if err != nil {
		return err
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	st, err := loadState(dir)
	if err != nil {
		st = b.recoverState(id, dir)
	}
	if err := killSilo(ctx, st.Cgroup, filepath.Join(dir, prefixDir)); err != nil {
		return fmt.Errorf("emulation: remove %s: %w", id, err)
	}
	if err := b.removeSystem(ctx, dir, st); err != nil {
		return fmt.Errorf("emulation: remove %s: %w", id, err)
	}
	b.reaper.poke()
	return nil
}

// recoverState is what can be known of the system id in dir without its
// state.json (a creation cut short before it was saved): its cgroups, if
// it made them, are where every system in dir gets them, and a
// HostProcess container is a user of the host prefix.
func (b *Backend) recoverState(id, dir string) *persisted {
	st := &persisted{Version: stateVersion, ID: id}
	if b.cgroups != nil {
		if c := b.cgroups.siloOf(dir); isDir(c) == nil {
			st.Cgroup = c
		}
	}
	st.LimitCgroups = existingLimitCgroups(dir)
	if _, err := os.Stat(filepath.Join(b.hostDir(), hostUsersDir, id)); err == nil {
		st.HostProcess = &hostProcessState{MountPoint: b.hostMountPoint(id)}
	}
	return st
}

// removeSystem tears the system in dir down (teardown). A HostProcess
// container first leaves the host prefix (leaveHostProcess).
func (b *Backend) removeSystem(ctx context.Context, dir string, st *persisted) error {
	if st != nil && st.HostProcess != nil {
		if err := b.leaveHostProcess(ctx, filepath.Base(dir), st); err != nil {
			return err
		}
	}
	return teardown(ctx, dir, st)
}

// killGrace bounds how long killSilo waits for SIGKILLed processes to go
// when its context has no deadline.
const killGrace = 10 * time.Second

// killSilo SIGKILLs every process of a silo (siloMembers: its cgroup's at
// once, or those of its prefix, the wineserver first) until none is left
// (zombies aside).
func killSilo(ctx context.Context, cgroup, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, killGrace)
	defer cancel()
	for {
		procs, err := siloMembers(cgroup, prefix)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		if cgroup != "" {
			if err := killCgroup(cgroup); err != nil {
				return err
			}
		}
		for _, p := range procs {
			if strings.HasPrefix(p.comm, "wineserver") {
				signalProc(p, unix.SIGKILL)
			}
		}
		for _, p := range procs {
			signalProc(p, unix.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes of %s still running: %w", prefix, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// signalProc sends sig to the process st describes, if it is still that
// process: it opens a pidfd and checks the start time first, so a pid that
// was reused in the meantime is left alone.
func signalProc(st procStat, sig unix.Signal) error {
	fd, err := unix.PidfdOpen(st.pid, 0)
	if errors.Is(err, unix.ENOSYS) {
		return unix.Kill(st.pid, sig)
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	now, err := readStat(st.pid)
	if err != nil || now.start != st.start {
		return unix.ESRCH
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// serverDirName matches the socket directory of a wineserver.
var serverDirName = regexp.MustCompile(`^server-[0-9a-f]+-[0-9a-f]+$`)

// teardown removes a system's directory: it unmounts everything below it
// (mapped directories, drive C:, the prefix), removes the silo's cgroup,
// the wineserver's socket directory and then the directory. The silo's
// processes must be gone. Nothing is deleted while anything below dir is
// still mounted, so a failure cannot reach into a layer or a mapped host
// directory.
func teardown(ctx context.Context, dir string, st *persisted) error {
	if st != nil && st.Cgroup != "" {
		if err := removeCgroup(ctx, st.Cgroup); err != nil {
			// The mounts go anyway: a busy one is detached.
			if uerr := unmountAll(ctx, dir); uerr != nil {
				return errors.Join(err, uerr)
			}
			return err
		}
	}
	if err := unmountAll(ctx, dir); err != nil {
		return err
	}
	if st != nil {
		if err := removeLimitCgroups(ctx, st.LimitCgroups); err != nil {
			return err
		}
	}
	if st != nil && st.ServerDir != "" && serverDirName.MatchString(filepath.Base(st.ServerDir)) {
		for _, f := range []string{"socket", "lock"} {
			os.Remove(filepath.Join(st.ServerDir, f))
		}
		os.Remove(st.ServerDir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
