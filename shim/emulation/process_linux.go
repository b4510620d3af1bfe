//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/internal/validation"
	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/compute"
)

// outputDrainTimeout bounds how long a process's Wait keeps copying its
// output after it exited: a grandchild that inherited the output pipe (or
// Wine's conhost.exe holding a pseudo terminal) may keep it open forever.
const outputDrainTimeout = 2 * time.Second

// process is a Wine process of a silo: `wine <program> <args>`.
type process struct {
	sys      *system
	cmd      *exec.Cmd
	pid      int
	terminal bool
	// pty is the master of a Terminal process's pseudo terminal.
	pty *os.File
	// stdin is the write end of the process's stdin pipe (not Terminal).
	stdin *os.File
	// outputs are the read ends the copiers read (the pty for Terminal).
	outputs []*os.File
	copiers sync.WaitGroup
	// exitRecord is the read end of the pipe the exit status recorder
	// writes to (nil without one); wait reads it.
	exitRecord *os.File

	stdinOnce   sync.Once
	stdinClosed chan struct{} // closed when stdin ends (Terminal: stops forwarding)
	closeOnce   sync.Once
	done        chan struct{}
	doneOnce    sync.Once
	killOnce    sync.Once

	mu       sync.Mutex
	exitCode int
	waitErr  error
}

var _ compute.Process = (*process)(nil)

// CreateProcess starts `wine <program> <args...>` in the system:
//
//   - the command line is split with wincmdline.SplitCommandLine; the program
//     is looked up as CreateProcess would (resolveProgram) and passed to
//     wine as a full C: path, so the Linux process started is the
//     program's own (Wine rebuilds the command line from the arguments, so
//     the program sees an equivalent, not always identical, one);
//   - the environment is built by processEnv;
//   - the working directory (default C:\) must exist; the process starts
//     with its Linux working directory at the matching directory below c/,
//     which Wine turns back into the Windows current directory;
//   - stdio are pipes copied to and from the streams, or with Terminal a
//     pseudo terminal (Wine then runs conhost.exe, which draws with VT
//     escape sequences);
//   - User is ignored: every process runs as the Linux user of the shim,
//     which Wine presents as the prefix's user.
//
// A HostProcess container's process (hostprocess_linux.go) runs in the
// host prefix by the rules both HostProcess backends share
// (shim/hostprocess): its program is found by hostProcessProgram (the
// mount point first), a relative or empty working directory is below the
// mount point, its environment is hostProcessEnv's and its User is checked
// and recorded (hostProcessUser), though not switched to either.
//
// Pid is the Linux pid of the Wine process.
func (s *system) CreateProcess(ctx context.Context, p *compute.ProcessSettings) (compute.Process, error) {
	if p == nil {
		return nil, errInvalid("emulation: no process settings")
	}
	commandLine, wd, env, user := p.CommandLine, p.WorkingDirectory, p.Env, ""
	if s.st.HostProcess != nil {
		var err error
		if commandLine, wd, user, err = s.hostProcessArgs(p); err != nil {
			return nil, err
		}
		env = hostProcessEnv(env, winJoin(mountPointComps(s.id)))
	}
	// What Wine would cut or refuse later (a long value cut short, Go's
	// "environment variable contains NUL") is refused here, by field.
	if err := validation.Process(commandLine, env); err != nil {
		return nil, fmt.Errorf("emulation: system %s: %w", s.id, err)
	}
	args := wincmdline.SplitCommandLine(commandLine)
	if len(args) == 0 || args[0] == "" {
		return nil, errInvalid("emulation: empty command line")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if wd == "" {
		wd = `C:\`
	}
	cwdComps, err := cPath(wd)
	if err != nil {
		return nil, fmt.Errorf("emulation: working directory: %w", err)
	}

	// The lock is held until the process is started, so a concurrent
	// Terminate either refuses it or finds it in its scan.
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usableLocked(); err != nil {
		return nil, err
	}
	switch s.phase {
	case phaseCreated:
		return nil, fmt.Errorf("emulation: system %s is not started: %w", s.id, errdefs.ErrFailedPrecondition)
	case phaseStopping:
		return nil, fmt.Errorf("emulation: system %s is stopping: %w", s.id, errdefs.ErrFailedPrecondition)
	}

	cmd, program, err := s.wineCommand(commandLine, args, wd, cwdComps, env)
	if err != nil {
		return nil, err
	}
	if s.st.HostProcess != nil {
		if err := s.hostProcessReadyLocked(ctx, user); err != nil {
			return nil, err
		}
	}
	proc := &process{
		sys:         s,
		cmd:         cmd,
		terminal:    p.Terminal,
		stdinClosed: make(chan struct{}),
		done:        make(chan struct{}),
	}
	// childEnds are closed once the child has them.
	childEnds, err := proc.connectStdio(p)
	fail := func(err error) (compute.Process, error) {
		for _, f := range childEnds {
			f.Close()
		}
		proc.closeFiles()
		return nil, err
	}
	if err != nil {
		return fail(err)
	}
	if s.b.exitLib != "" {
		w, err := proc.recordExitStatus(s.b.exitLib)
		if err != nil {
			return fail(fmt.Errorf("emulation: %w", err))
		}
		childEnds = append(childEnds, w)
	}

	if err := s.startProcess(cmd, false); err != nil {
		return fail(fmt.Errorf("emulation: start %s: %w", program, err))
	}
	for _, f := range childEnds {
		f.Close()
	}
	proc.pid = cmd.Process.Pid
	s.ran = true
	if limit := s.st.Resources.MemoryLimitBytes; limit > 0 && s.st.LimitCgroups["memory"] != "" {
		if err := limitCommit(proc.pid, limit); err != nil {
			log.G(ctx).WithError(err).Warn("emulation: the process's commit is not limited")
		}
	}
	proc.startCopiers(p)
	return proc, nil
}

// wineCommand is the command that runs commandLine (args, split) under
// Wine: the program looked up as CreateProcess would (resolveProgram, or
// hostProcessProgram in a HostProcess container), passed to wine as a full
// C: path, in the working directory wd (cwdComps: its components below
// C:), with the environment processEnv makes of env. s.mu is held.
func (s *system) wineCommand(commandLine string, args []string, wd string, cwdComps, env []string) (cmd *exec.Cmd, program string, err error) {
	realCwd, err := resolve(s.cdir, cwdComps)
	if err != nil || isDir(filepath.Join(append([]string{s.cdir}, realCwd...)...)) != nil {
		return nil, "", errInvalid("emulation: working directory %s does not exist in the container", wd)
	}
	procEnv, winPath := processEnv(env, s.prefix)
	if s.st.HostProcess != nil {
		program, args, err = s.hostProcessProgram(commandLine, realCwd, winPath)
	} else {
		program, err = resolveProgram(s.cdir, args[0], realCwd, winPath)
		args = args[1:]
	}
	if err != nil {
		return nil, "", fmt.Errorf("emulation: %w", err)
	}

	// setarch -R: Wine's fixed address for the shared user data
	// (0x7ffe0000) lies in the range the kernel picks a randomized heap
	// from; see doc.go.
	cmd = exec.Command(s.b.setarch, append([]string{"-R", s.b.wine, program}, args...)...)
	cmd.Env = procEnv
	cmd.Dir = filepath.Join(append([]string{s.cdir}, realCwd...)...)
	return cmd, program, nil
}

// recordExitStatus has the process record its exit status with the
// preload library lib (build/wine/wineexit.c) on a pipe it gets as
// descriptor 3, named with its identity and this process's pid so that only
// the process started here records. It returns the pipe's write end, for
// the caller to close once the process has it.
func (p *process) recordExitStatus(lib string) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("exit status pipe: %w", err)
	}
	p.exitRecord = r
	p.cmd.ExtraFiles = []*os.File{w} // descriptor 3
	p.cmd.Env = append(p.cmd.Env, "LD_PRELOAD="+lib, fmt.Sprintf("WINPROC_EXIT_FD=3:%d:%d:%d", st.Dev, st.Ino, os.Getpid()))
	return w, nil
}

// recordedExit reads the exit status the process recorded before it exited,
// if it did: all 32 bits of its Windows exit code, also when the wineserver
// killed it during its exit. Called once the process has been reaped: the
// record, written before the exit, is in the pipe by then, so the read does
// not wait (a process the process created may hold the pipe open, so there
// is no EOF to wait for).
func (p *process) recordedExit() (code int, ok bool) {
	if p.exitRecord == nil {
		return 0, false
	}
	rc, err := p.exitRecord.SyscallConn()
	if err != nil {
		return 0, false
	}
	buf := make([]byte, 512)
	n := 0
	rc.Read(func(fd uintptr) bool {
		n, _ = unix.Read(int(fd), buf)
		return true // never wait for more
	})
	for _, line := range strings.Split(string(buf[:max(n, 0)]), "\n") {
		var pid int
		var status int32
		if _, err := fmt.Sscanf(line, "%d %d", &pid, &status); err == nil && pid == p.pid {
			return int(uint32(status)), true
		}
	}
	return 0, false
}

// consoleEOF is how a Windows console user ends input: Ctrl-Z, then
// Enter. A program reading its console in line mode takes it as EOF.
const consoleEOF = "\x1a\r"

// closeFiles closes the backend's ends of the streams, which ends the
// copiers.
func (p *process) closeFiles() {
	p.closeStdin()
	for _, f := range p.outputs {
		f.Close()
	}
	if p.pty != nil {
		p.pty.Close()
	}
	if p.exitRecord != nil {
		p.exitRecord.Close()
	}
}

// wait waits for the process, then for its output (bounded by
// outputDrainTimeout), then closes Wait.
func (p *process) wait() {
	err := p.cmd.Wait()
	p.sys.b.reaper.waited(p.pid)
	code := -1
	if ps := p.cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
			p.sys.addCPU(timevalDuration(unix.Timeval(ru.Utime)), timevalDuration(unix.Timeval(ru.Stime)))
		}
		code, err = exitCode(ps, err)
		recorded, ok := p.recordedExit()
		ws, _ := ps.Sys().(syscall.WaitStatus)
		switch {
		case ok && ws.Signaled():
			// It had called exit(): the wineserver's kill of a process
			// that closed its connection and was still alive (doc.go).
			log.L.WithFields(log.Fields{"system": p.sys.id, "pid": p.pid, "signal": ws.Signal().String(), "exitCode": recorded}).Debug("emulation: process killed during its exit; its exit code is the recorded one")
			code, err = recorded, nil
		case ok:
			code = recorded
		case ws.Signaled():
			// Exit code 1 says only "terminated"; the signal tells who
			// (SIGKILL: Kill, Terminate or a lost wineserver; SIGINT: a
			// console event Wine did not turn into CTRL_C).
			log.L.WithFields(log.Fields{"system": p.sys.id, "pid": p.pid, "signal": ws.Signal().String()}).Warn("emulation: process ended by a signal; its exit code is 1")
		}
	}
	drained := make(chan struct{})
	go func() {
		p.copiers.Wait()
		close(drained)
	}()
	select {
	case <-drained:
	case <-time.After(outputDrainTimeout):
		// A grandchild holds the output open: stop copying.
		for _, f := range p.outputs {
			f.Close()
		}
		<-drained
	}
	p.closeFiles()
	p.finish(code, err)
}

// finish records the process's exit and closes Wait, once: the exit
// given up on (exitGrace) or the real one, whichever comes first.
func (p *process) finish(code int, err error) {
	p.doneOnce.Do(func() {
		p.mu.Lock()
		p.exitCode, p.waitErr = code, err
		p.mu.Unlock()
		close(p.done)
	})
}

// exitGrace is how long a SIGKILLed process has to end before its exit
// is reported anyway. A process in a frozen cgroup takes SIGKILL only
// when thawed; a stop waiting for it would hold its container and pod
// past the kubelet's deadline, and HCS's terminate gives a process no
// such say. The system's teardown, carried on in the background, ends it.
const exitGrace = 3 * time.Second

// reportKilledAfterGrace reports a SIGKILLed process exited (1, as
// TerminateProcess's) if it has not ended after exitGrace.
func (p *process) reportKilledAfterGrace() {
	select {
	case <-p.done:
		return
	case <-time.After(exitGrace):
	}
	log.L.WithFields(log.Fields{"system": p.sys.id, "pid": p.pid, "grace": exitGrace}).Warn("emulation: a killed process has not ended (its cgroup frozen?); its exit is reported as terminated, and its system's teardown goes on ending it")
	p.finish(1, nil)
}

// exitCode is the exit code of a finished Wine process as the kernel tells
// it: the low 8 bits of its Windows exit code (0xC000013A arrives as 0x3A,
// 58), or 1, the code TerminateProcess conventionally gives, for a process
// ended by a signal. The recorded status (recordedExit), when there is one,
// replaces it.
func exitCode(ps *os.ProcessState, err error) (int, error) {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Exited():
			return ws.ExitStatus(), nil
		case ws.Signaled():
			return 1, nil
		}
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return -1, err
	}
	return ps.ExitCode(), nil
}

func (p *process) Pid() int { return p.pid }

func (p *process) Wait() <-chan struct{} { return p.done }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) gone() error {
	return fmt.Errorf("emulation: process %d has exited: %w", p.pid, errdefs.ErrNotFound)
}

func (p *process) ExitCode() (int, error) {
	if !p.exited() {
		return -1, fmt.Errorf("emulation: process %d is still running: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr != nil {
		return -1, fmt.Errorf("emulation: process %d: %w", p.pid, p.waitErr)
	}
	return p.exitCode, nil
}

// signal sends sig through os.Process, which uses a pidfd: once the
// process has been reaped it reports ErrProcessDone instead of signalling
// whatever got its pid.
func (p *process) signal(sig os.Signal) error {
	if p.exited() {
		return p.gone()
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return p.gone()
		}
		return fmt.Errorf("emulation: signal process %d: %w", p.pid, err)
	}
	return nil
}

// Signal delivers every console event as SIGINT, which Wine turns into
// CTRL_C_EVENT for the process's console control handlers: Wine has no
// Unix signal for CTRL_BREAK_EVENT and cannot deliver CTRL_SHUTDOWN,
// CTRL_CLOSE or CTRL_LOGOFF, and CTRL_C is the event a program that
// handles those handles as well.
func (p *process) Signal(ctx context.Context, s compute.Signal) error {
	switch s {
	case compute.CtrlC, compute.CtrlBreak, compute.CtrlShutdown, compute.CtrlClose, compute.CtrlLogOff:
		return p.signal(syscall.SIGINT)
	}
	return errInvalid("emulation: unknown signal %v", s)
}

// Kill SIGKILLs the Wine process (only it, as TerminateProcess would);
// its exit comes by exitGrace whether or not it ends.
func (p *process) Kill(ctx context.Context) error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.killOnce.Do(func() { go p.reportKilledAfterGrace() })
	return nil
}

func (p *process) ResizeConsole(ctx context.Context, width, height uint16) error {
	if p.exited() {
		return p.gone()
	}
	if !p.terminal {
		return fmt.Errorf("emulation: process %d has no console: %w", p.pid, errdefs.ErrFailedPrecondition)
	}
	if err := resizePty(p.pty, width, height); err != nil {
		return fmt.Errorf("emulation: resize console of process %d: %w", p.pid, err)
	}
	return nil
}

// Close stops the copying of the streams and releases the backend's ends
// of them. The process keeps running; its waiter still closes Wait when it
// exits.
func (p *process) Close() error {
	p.closeOnce.Do(p.closeFiles)
	return nil
}
