package jobcontainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/validation"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
	"github.com/winproc/winproc/shim/procexit"
	"github.com/winproc/winproc/shim/relay"
)

// defaultConsoleWidth and defaultConsoleHeight are a pseudo console's
// size when the caller gives none.
const (
	defaultConsoleWidth  = 80
	defaultConsoleHeight = 25
)

// CreateProcess starts a process in the job, as its user, from its command
// line with no shell in between:
//
//  1. the user's token (users.go) and its profile's environment, with the
//     container's additions (hostprocess.Environment);
//  2. the working directory, under the mount point unless it is a full
//     path (hostprocess.WorkingDirectory); one under the mount point that
//     is missing is made, as runhcs does;
//  3. the program, found as CreateProcess finds it with the mount point
//     searched first (hostprocess.ResolveProgram): a missing one fails
//     here, naming it;
//  4. pipes for the streams asked for, or a pseudo console;
//  5. CreateProcessAsUser suspended, AssignProcessToJobObject, then
//     ResumeThread: the process runs only once it is in the job, so every
//     process it starts is in the job too. One whose system stopped
//     meanwhile (its last process exited) is terminated, and the start
//     fails.
func (s *system) CreateProcess(ctx context.Context, ps *compute.ProcessSettings) (compute.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ps == nil || strings.TrimSpace(ps.CommandLine) == "" {
		return nil, invalid("process in HostProcess container %s: the command line is empty: name the program to run", s.id)
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	started := !s.started.IsZero()
	s.mu.Unlock()
	if !started {
		return nil, fmt.Errorf("HostProcess container %s has not been started: %w", s.id, errdefs.ErrFailedPrecondition)
	}
	params, err := s.processParams(ctx, ps)
	if err != nil {
		return nil, fmt.Errorf("process %q in HostProcess container %s: %w", ps.CommandLine, s.id, err)
	}
	p, err := s.launch(ctx, ps, params)
	if err != nil {
		return nil, fmt.Errorf("process %q in HostProcess container %s: %w", ps.CommandLine, s.id, err)
	}
	return p, nil
}

// processParams are steps 1 to 3: the token, the environment, the
// directory and the program.
func (s *system) processParams(ctx context.Context, ps *compute.ProcessSettings) (startParams, error) {
	host := s.b.host
	token, err := s.token(ctx, ps.User)
	if err != nil {
		return startParams{}, err
	}
	profile, err := host.userEnvironment(token)
	if err != nil {
		return startParams{}, classify("the user's environment (CreateEnvironmentBlock)", err, host.facts(err))
	}
	windowsDir, err := host.windowsDirectory()
	if err != nil {
		return startParams{}, classify("the Windows directory", err, host.facts(err))
	}
	dir := hostprocess.WorkingDirectory(ps.WorkingDirectory, s.mountPoint)
	if !host.isDir(dir) {
		if !strings.HasPrefix(strings.ToLower(dir), strings.ToLower(s.mountPoint)+`\`) && !strings.EqualFold(dir, s.mountPoint) {
			return startParams{}, fmt.Errorf("the working directory %s does not exist on the host: a full path is the host's; give a path relative to the container's rootfs, or one under %%%s%%: %w", dir, compute.SandboxMountPointEnv, errdefs.ErrNotFound)
		}
		if err := host.mkdirAll(dir); err != nil {
			return startParams{}, classify(fmt.Sprintf("make the working directory %s", dir), err, host.facts(err))
		}
	}
	env := hostprocess.Environment(profile, ps.Env, s.mountPoint, windowsDir)
	path, _ := env.Get("PATH")
	prog, err := hostprocess.ResolveProgram(ps.CommandLine, s.mountPoint, dir, hostprocess.SearchPath(s.mountPoint, dir, windowsDir, path), host.isFile)
	if err != nil {
		return startParams{}, err
	}
	// The command line CreateProcess gets, once the mount point is in it.
	if err := validation.Process(prog.CommandLine, ps.Env); err != nil {
		return startParams{}, err
	}
	return startParams{token: token, application: prog.Path, commandLine: prog.CommandLine, env: env, dir: dir}, nil
}

// launch is steps 4 and 5, and the process's wait.
func (s *system) launch(ctx context.Context, ps *compute.ProcessSettings, params startParams) (*process, error) {
	host := s.b.host
	st, err := newStdio(host, ps)
	if err != nil {
		return nil, err
	}
	params.stdin, params.stdout, params.stderr, params.console = st.childIn, st.childOut, st.childErr, st.console
	cancel, err := host.createEvent()
	if err != nil {
		st.close(host)
		return nil, classify("create the process's close event", err, host.facts(err))
	}
	var started started
	var p *process
	err = s.withJob(func(job handle) error {
		var err error
		if started, err = host.createProcess(params); err != nil {
			return s.b.startFailed(params.application, err)
		}
		if err = host.assignProcessToJobObject(job, started.process); err != nil {
			err = classify("put the process in the container's job object", err, host.facts(err))
		} else {
			// Tracked before it runs: a process that exits at once may
			// stop the system before this returns.
			p = &process{
				sys:      s,
				pid:      int(started.pid),
				terminal: ps.Terminal,
				h:        started.process,
				cancel:   cancel,
				console:  st.console,
				exit:     procexit.New(int(started.pid)),
			}
			if err = s.track(p); err == nil {
				if err = host.resumeThread(started.thread); err != nil {
					s.forget(p)
					err = classify("resume the process", err, host.facts(err))
				}
			}
		}
		if err != nil {
			if terr := host.terminateProcess(started.process, 1); terr != nil {
				log.G(ctx).WithError(terr).Warn("terminate a process that failed to start")
			}
		}
		return err
	})
	st.closeChildEnds()
	if started.thread != 0 {
		s.b.closeHandle(ctx, started.thread)
	}
	if err != nil {
		s.b.closeHandle(ctx, started.process)
		s.b.closeHandle(ctx, cancel)
		st.close(host)
		return nil, err
	}
	logger := log.G(ctx).WithFields(log.Fields{"id": s.id, "pid": p.pid})
	p.relay = relay.Start(st.in, st.out, st.errOut, ps.Stdin, ps.Stdout, ps.Stderr, nil, logger)
	go p.wait()
	return p, nil
}

// stdio are a process's pipes: the backend's ends (in, out, errOut) and
// the child's, or a pseudo console whose input and output are in and out.
type stdio struct {
	in                          io.WriteCloser
	out, errOut                 io.ReadCloser
	childIn, childOut, childErr *os.File
	console                     handle
}

// newStdio makes the pipes of the streams ps connects; a Terminal process
// gets a pseudo console instead, its stderr merged into stdout.
func newStdio(h host, ps *compute.ProcessSettings) (*stdio, error) {
	st := &stdio{}
	pipe := func(want bool, child **os.File, childReads bool) (*os.File, error) {
		if !want {
			return nil, nil
		}
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("make a pipe for the process's stdio: %w", err)
		}
		if childReads {
			*child = r
			return w, nil
		}
		*child = w
		return r, nil
	}
	var in, out, errOut *os.File
	var err error
	if in, err = pipe(ps.Stdin != nil || ps.Terminal, &st.childIn, true); err == nil {
		if out, err = pipe(ps.Stdout != nil || ps.Terminal, &st.childOut, false); err == nil {
			out2, err2 := pipe(ps.Stderr != nil && !ps.Terminal, &st.childErr, false)
			errOut, err = out2, err2
		}
	}
	// Only the pipes made are set: a nil *os.File in the interface would
	// not be nil.
	if in != nil {
		st.in = in
	}
	if out != nil {
		st.out = out
	}
	if errOut != nil {
		st.errOut = errOut
	}
	if err != nil {
		st.close(h)
		return nil, err
	}
	if ps.Terminal {
		w, ht := ps.ConsoleWidth, ps.ConsoleHeight
		if w == 0 || ht == 0 {
			w, ht = defaultConsoleWidth, defaultConsoleHeight
		}
		if st.console, err = h.createPseudoConsole(w, ht, st.childIn, st.childOut); err != nil {
			st.close(h)
			return nil, classify("create the process's pseudo console", err, h.facts(err))
		}
		// The console holds its own ends; the process gets the console.
		st.closeChildEnds()
	}
	return st, nil
}

// closeChildEnds closes the child's ends once the process has them.
func (st *stdio) closeChildEnds() {
	for _, f := range []**os.File{&st.childIn, &st.childOut, &st.childErr} {
		if *f != nil {
			(*f).Close()
			*f = nil
		}
	}
}

// close closes everything, for a process that did not start.
func (st *stdio) close(h host) {
	st.closeChildEnds()
	if st.in != nil {
		st.in.Close()
	}
	if st.out != nil {
		st.out.Close()
	}
	if st.errOut != nil {
		st.errOut.Close()
	}
	if st.console != 0 {
		h.closePseudoConsole(st.console)
	}
}

// startFailed is the error of a CreateProcessAsUser that failed. Access
// denied is the breakaway the binding asks for
// (CREATE_BREAKAWAY_FROM_JOB, so that the process is in the container's
// job alone): a shim in a job without JOB_OBJECT_LIMIT_BREAKAWAY_OK, as
// containerd started in such a job starts it, is refused it; the shim's
// own job says whether that is the cause (its immediate job's limits, as
// QueryInformationJobObject reads them for NULL).
func (b *Backend) startFailed(program string, err error) error {
	host := b.host
	what := fmt.Sprintf("start %s", program)
	if !host.facts(err).AccessDenied {
		return classify(what, err, host.facts(err))
	}
	in, flags, jerr := host.ownJob()
	if jerr != nil || !in || flags&(limitBreakawayOK|limitSilentBreakaway) != 0 {
		return classify(what, err, host.facts(err))
	}
	return fmt.Errorf("%s: %w: the shim runs in a job object that does not allow breakaway (no JOB_OBJECT_LIMIT_BREAKAWAY_OK in its limits), so CreateProcess with CREATE_BREAKAWAY_FROM_JOB, which puts the process in its container's job alone, is refused: run containerd (and so its shims) outside a job, or in one whose limits include JOB_OBJECT_LIMIT_BREAKAWAY_OK: %w", what, err, errdefs.ErrFailedPrecondition)
}
