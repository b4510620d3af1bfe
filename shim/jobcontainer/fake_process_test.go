// The fake host's processes: their start, exit, termination, console
// events and pseudo consoles, and the system's process list.

package jobcontainer

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

func (f *fakeHost) createProcess(p startParams) (started, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("createProcess", p.application); err != nil {
		return started{}, err
	}
	if f.shimJob != nil && *f.shimJob&(limitBreakawayOK|limitSilentBreakaway) == 0 {
		// The binding asks for CREATE_BREAKAWAY_FROM_JOB, which a job
		// without breakaway refuses (CreateProcessW's documentation).
		return started{}, errorAccessDenied
	}
	if _, ok := f.get(p.token).(fakeToken); !ok {
		f.t.Errorf("createProcess with token %d, which is not a token", p.token)
	}
	args := strings.Fields(p.commandLine)
	proc := &fakeProc{pid: f.nextPID, params: p, args: args[1:], exit: make(chan struct{}), console: p.console != 0}
	f.nextPID += 4
	f.procs[proc.pid] = proc
	return started{process: f.newHandle(proc), thread: f.newHandle(&fakeThread{proc}), pid: proc.pid}, nil
}

// resumeThread runs the fake process: what it writes is written now, while
// the core still holds the child's ends of the pipes.
func (f *fakeHost) ownJob() (bool, uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("ownJob"); err != nil || f.shimJob == nil {
		return false, 0, err
	}
	return true, *f.shimJob, nil
}

func (f *fakeHost) resumeThread(thread handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("resumeThread"); err != nil {
		return err
	}
	p := f.get(thread).(*fakeThread).p
	what := ""
	if len(p.args) > 0 {
		what = p.args[0]
	}
	switch what {
	case "exit":
		code, _ := strconv.ParseUint(p.args[1], 0, 32)
		f.exitLocked(p, uint32(code))
	case "print":
		if p.params.stdout != nil {
			fmt.Fprint(p.params.stdout, strings.Join(p.args[1:], " "))
		}
		f.exitLocked(p, 0)
	case "env":
		if p.params.stdout != nil {
			fmt.Fprintf(p.params.stdout, "%s\ncwd=%s\napp=%s\nline=%s\n", strings.Join(p.params.env, "\n"), p.params.dir, p.params.application, p.params.commandLine)
		}
		f.exitLocked(p, 0)
	case "spawn":
		child := &fakeProc{pid: f.nextPID, args: []string{"ignore"}, exit: make(chan struct{}), job: p.job}
		f.nextPID += 4
		f.procs[child.pid] = child
		p.job.active[child.pid] = child
		p.job.total++
	}
	return nil
}

func (f *fakeHost) waitProcess(process, cancel handle) (bool, error) {
	f.mu.Lock()
	p := f.get(process).(*fakeProc)
	e := f.get(cancel).(*fakeEvent)
	f.mu.Unlock()
	select {
	case <-p.exit:
		return true, nil
	case <-e.set:
		return false, nil
	}
}

func (f *fakeHost) exitCode(process handle) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(process).(*fakeProc).code, f.callLocked("exitCode")
}

func (f *fakeHost) terminateProcess(process handle, code uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("terminateProcess"); err != nil {
		return err
	}
	p := f.get(process).(*fakeProc)
	if p.exited {
		return errorAccessDenied
	}
	f.exitLocked(p, code)
	return nil
}

func (f *fakeHost) openProcess(pid uint32) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("openProcess", strconv.Itoa(int(pid))); err != nil {
		return 0, err
	}
	p := f.procs[pid]
	if p == nil || p.exited {
		return 0, errorInvalidParameter
	}
	return f.newHandle(p), nil
}

func (f *fakeHost) ctrlEvent(process handle, event uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("ctrlEvent", strconv.Itoa(int(event))); err != nil {
		return err
	}
	p := f.get(process).(*fakeProc)
	p.events = append(p.events, event)
	if len(p.args) > 0 && (p.args[0] == "sleep" || p.args[0] == "spawn") {
		f.exitLocked(p, 0xC000013A)
	}
	return nil
}

func (f *fakeHost) createEvent() (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("createEvent"); err != nil {
		return 0, err
	}
	return f.newHandle(&fakeEvent{set: make(chan struct{})}), nil
}

func (f *fakeHost) setEvent(event handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.get(event).(*fakeEvent)
	select {
	case <-e.set:
	default:
		close(e.set)
	}
	return f.callLocked("setEvent")
}

func (f *fakeHost) createPseudoConsole(w, h uint16, in, out *os.File) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("createPseudoConsole", fmt.Sprintf("%dx%d", w, h)); err != nil {
		return 0, err
	}
	return f.newHandle(&fakeConsole{w, h}), nil
}

func (f *fakeHost) resizePseudoConsole(c handle, w, h uint16) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.get(c).(*fakeConsole) = fakeConsole{w, h}
	return f.callLocked("resizePseudoConsole", fmt.Sprintf("%dx%d", w, h))
}

// closePseudoConsole ends the processes attached to the console, as
// ClosePseudoConsole does ("client applications attached to the session
// will be terminated as well"), with STATUS_CONTROL_C_EXIT, the exit of a
// console process closed under it.
func (f *fakeHost) closePseudoConsole(c handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(c)
	for _, p := range f.procs {
		if p.params.console == c {
			f.exitLocked(p, 0xC000013A)
		}
	}
	f.closeLocked(c)
	f.callLocked("closePseudoConsole")
}

func (f *fakeHost) systemProcesses() ([]processRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("systemProcesses"); err != nil {
		return nil, err
	}
	out := []processRecord{{PID: 4, ImageName: "System"}}
	for _, p := range f.procs {
		if !p.exited {
			out = append(out, processRecord{PID: p.pid, ImageName: "app.exe", CreateTime: 133000000000000000, UserTime: 10, KernelTime: 5, PrivateBytes: 1000, WorkingSet: 3000, PrivateSet: 2000})
		}
	}
	return out, nil
}
