//go:build linux

package emulation

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/containernetworking/plugins/pkg/ns"
)

// Start starts the silo's wineserver, in the foreground (-f) and
// persistent (-p: it does not exit when its last client does) as a child of
// this process, and waits until it listens on its socket. A HostProcess
// container has none of its own (startHostProcessLocked).
func (s *system) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return err
	}
	if s.phase != phaseCreated || s.opened {
		return fmt.Errorf("emulation: system %s is already started: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	if s.st.HostProcess != nil {
		return s.startHostProcessLocked()
	}
	out := &tailBuffer{max: 4096}
	cmd := s.b.wineserverCommand(s.prefix, s.dir)
	cmd.Stdout, cmd.Stderr = out, out
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

// bootLog is the file, in the directory of the system (or of the host
// prefix), that holds the boot process's output.
const bootLog = "boot.log"

// bootProgram is a prefix's first process: Wine's hostname.exe, by its path
// in the template prefix (an image's own System32 may shadow it on C:).
const bootProgram = "drive_c/windows/system32/hostname.exe"

// wineserverCommand is the command that runs the wineserver of prefix in
// the foreground (-f) and persistent (-p: it does not exit when its last
// client does), in its own process group, from dir.
func (b *Backend) wineserverCommand(prefix, dir string) *exec.Cmd {
	cmd := exec.Command(b.wineserver, "-f", "-p")
	cmd.Env = append(baseEnv(), wineEnv(prefix)...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// bootTarget is a prefix whose wineserver has just started: a silo, or the
// host prefix of HostProcess containers.
type bootTarget struct {
	// who names it in logs; dir holds its bootLog.
	who, dir     string
	prefix, cdir string
	// start starts a process of Wine's own there; members lists the
	// running processes there.
	start   func(*exec.Cmd) error
	members func() ([]procStat, error)
}

// boot starts the silo's first process.
func (s *system) boot(ctx context.Context) error {
	return s.b.boot(ctx, bootTarget{
		who: s.id, dir: s.dir, prefix: s.prefix, cdir: s.cdir,
		start:   func(cmd *exec.Cmd) error { return s.startProcess(cmd, true) },
		members: s.processes,
	})
}

// boot starts the first process of a prefix and returns once Wine's boot
// is under way, as a Windows silo starts its system processes when it
// starts. The first process of a wineserver starts wineboot, which starts
// services.exe and the services it runs, and they inherit its stderr: were
// that a container process's, they would hold its output open until the
// silo ends, and its Wait would end only at outputDrainTimeout. So a
// process of the emulation's own is first, with its output in a file (a
// pipe would stay open as long as they run). Later processes find the boot
// under way and wait for it inside Wine, so boot waits only until wineboot
// runs (or the first process has ended), not for the boot to finish.
func (b *Backend) boot(ctx context.Context, t bootTarget) error {
	ctx, cancel := context.WithTimeout(ctx, serverStartTimeout)
	defer cancel()
	logPath := filepath.Join(t.dir, bootLog)
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	env, _ := processEnv(nil, t.prefix)
	cmd := exec.Command(b.setarch, "-R", b.wine, filepath.Join(b.template, bootProgram))
	cmd.Env, cmd.Dir = env, t.cdir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := t.start(cmd); err != nil {
		return fmt.Errorf("start the boot process: %w", err)
	}
	// Its waiter, owned by the prefix: it ends with the process, in a
	// moment, or when the prefix's processes are killed.
	ended := make(chan struct{})
	go func() {
		if err := cmd.Wait(); err != nil {
			out, _ := os.ReadFile(logPath)
			log.L.WithError(err).WithFields(log.Fields{"system": t.who, "output": string(bytes.TrimSpace(out))}).Warn("emulation: the boot process failed")
		}
		b.reaper.waited(cmd.Process.Pid)
		close(ended)
	}()
	for {
		procs, err := t.members()
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
