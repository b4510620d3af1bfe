package jobcontainer

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/testwait"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/hostprocess"
)

// The fake of Windows is a host: job objects with their processes, exits,
// completion ports and messages, kill-on-close; tokens, users and groups;
// a file system of paths; volume mount points that show the image's files.
// A fake process does what its command line's first argument says:
//
//	exit N     exits with N once resumed
//	print S    writes S to stdout, then exits 0
//	env        writes its environment and directory to stdout, exits 0
//	sleep      runs until a console event (then exits 0xC000013A, as a
//	           process without a handler does) or termination
//	ignore     runs until terminated
//	spawn      as sleep, and starts a child in the job that ignores events
//
// Calls are recorded by name (and first argument), and fail as queued.

type fakeHost struct {
	t *testing.T

	mu      sync.Mutex
	calls   []string
	fail    map[string][]error
	next    handle
	handles map[handle]any // *fakeJob, *fakePort, *fakeProc, *fakeThread, *fakeEvent, fakeToken, *fakeConsole
	closed  map[handle]bool
	jobs    map[string]*fakeJob
	nextPID uint32
	procs   map[uint32]*fakeProc

	files   map[string]bool // lower-cased path → is a directory
	links   map[string]string
	mounts  map[string]string // mount point → volume
	binds   map[string]string // binding root → source; nil: no bind filter
	image   []string          // files of the image, relative to its root
	volume  string            // what MountPath answers
	users   map[string]string // name → group
	groups  map[string]bool
	ownSID  string
	shimJob *uint32 // the limit flags of the job the shim is in; nil: none
	profile []string
	cpus    uint32
	// jobCommit is the committed memory jobMemory answers; 0: 1000
	// bytes for each process, what their records say.
	jobCommit uint64
}

type fakeJob struct {
	name     string
	handles  int
	flags    uint32
	memory   uint64
	cpuFlags uint32
	cpuValue uint32
	affinity []groupAffinity
	port     *fakePort
	active   map[uint32]*fakeProc
	total    uint32
}

type fakePort struct{ msgs chan uintptr }

type fakeProc struct {
	pid     uint32
	params  startParams
	args    []string
	job     *fakeJob
	exit    chan struct{}
	code    uint32
	events  []uint32
	exited  bool
	console bool
}

type fakeEvent struct{ set chan struct{} }

type fakeThread struct{ p *fakeProc }

type fakeToken string

type fakeConsole struct{ width, height uint16 }

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{
		t:       t,
		fail:    make(map[string][]error),
		handles: make(map[handle]any),
		closed:  make(map[handle]bool),
		jobs:    make(map[string]*fakeJob),
		nextPID: 100,
		procs:   make(map[uint32]*fakeProc),
		files:   map[string]bool{`c:\windows`: true, `c:\windows\system32`: true, `c:\windows\system32\cmd.exe`: false, `c:\data`: true},
		links:   make(map[string]string),
		mounts:  make(map[string]string),
		image:   []string{`app.exe`, `bin\tool.exe`},
		volume:  `\\?\Volume{0b1e6a53-0000-0000-0000-000000000001}\`,
		users:   make(map[string]string),
		groups:  map[string]bool{"administrators": true, "users": true},
		ownSID:  systemSID,
		profile: []string{"PATH=C:\\Windows\\system32;C:\\Windows", "USERPROFILE=C:\\Users\\x", "TEMP=C:\\Users\\x\\Temp"},
		cpus:    8,
	}
}

// call records a call and returns the error queued for it.
func (f *fakeHost) call(name string, arg ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.callLocked(name, arg...)
}

func (f *fakeHost) callLocked(name string, arg ...string) error {
	c := name
	if len(arg) > 0 {
		c += " " + strings.Join(arg, " ")
	}
	f.calls = append(f.calls, c)
	if q := f.fail[name]; len(q) > 0 {
		f.fail[name] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fakeHost) failNext(name string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[name] = append(f.fail[name], errs...)
}

func (f *fakeHost) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// callNames are the names of the calls made, without arguments, leaving
// out the job's reads (the watch makes them at its own pace).
func (f *fakeHost) callNames() []string {
	var out []string
	for _, c := range withoutWatch(f.callList()) {
		name, _, _ := strings.Cut(c, " ")
		out = append(out, name)
	}
	return out
}

// withoutWatch leaves out of calls the job's reads, which the watch makes
// at its own pace.
func withoutWatch(calls []string) []string {
	var out []string
	for _, c := range calls {
		name, _, _ := strings.Cut(c, " ")
		switch name {
		case "jobAccounting", "jobMessage", "windowsDirectory", "activeProcessors":
			continue
		}
		out = append(out, c)
	}
	return out
}

func (f *fakeHost) newHandle(v any) handle {
	f.next++
	f.handles[f.next] = v
	return f.next
}

// get returns the object of h, failing the test for a closed or unknown
// handle: Windows would use whatever the handle value means by then.
func (f *fakeHost) get(h handle) any {
	if f.closed[h] {
		f.t.Errorf("handle %d used after it was closed", h)
	}
	v, ok := f.handles[h]
	if !ok && !f.closed[h] {
		f.t.Errorf("unknown handle %d", h)
	}
	return v
}

func (f *fakeHost) openHandles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for h, v := range f.handles {
		out = append(out, fmt.Sprintf("%d:%T", h, v))
	}
	sort.Strings(out)
	return out
}

// exitLocked ends p with code, and sends the job's messages.
func (f *fakeHost) exitLocked(p *fakeProc, code uint32) {
	if p.exited {
		return
	}
	p.exited, p.code = true, code
	close(p.exit)
	if j := p.job; j != nil {
		delete(j.active, p.pid)
		if j.port != nil {
			j.port.msgs <- jobKey
			if len(j.active) == 0 {
				j.port.msgs <- jobKey
			}
		}
	}
}

func (f *fakeHost) createJobObject(name string) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("createJobObject", name); err != nil {
		return 0, err
	}
	if j := f.jobs[name]; j != nil {
		return 0, errJobExists
	}
	j := &fakeJob{name: name, handles: 1, active: make(map[uint32]*fakeProc)}
	f.jobs[name] = j
	return f.newHandle(j), nil
}

func (f *fakeHost) openJobObject(name string) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("openJobObject", name); err != nil {
		return 0, err
	}
	j := f.jobs[name]
	if j == nil {
		return 0, errorFileNotFound
	}
	j.handles++
	return f.newHandle(j), nil
}

func (f *fakeHost) job(h handle) *fakeJob {
	j, _ := f.get(h).(*fakeJob)
	if j == nil {
		f.t.Errorf("handle %d is not a job", h)
		return &fakeJob{active: map[uint32]*fakeProc{}}
	}
	return j
}

func (f *fakeHost) setJobLimits(job handle, flags uint32, mem uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("setJobLimits", fmt.Sprintf("%#x", flags), strconv.FormatUint(mem, 10)); err != nil {
		return err
	}
	j := f.job(job)
	j.flags, j.memory = flags, mem
	return nil
}

func (f *fakeHost) setJobCPURate(job handle, flags, value uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("setJobCPURate", fmt.Sprintf("%#x", flags), strconv.Itoa(int(value))); err != nil {
		return err
	}
	j := f.job(job)
	j.cpuFlags, j.cpuValue = flags, value
	return nil
}

func (f *fakeHost) setJobAffinity(job handle, groups []groupAffinity) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("setJobAffinity", fmt.Sprint(groups)); err != nil {
		return err
	}
	f.job(job).affinity = groups
	return nil
}

func (f *fakeHost) associateCompletionPort(job, port handle, key uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("associateCompletionPort"); err != nil {
		return err
	}
	p, _ := f.get(port).(*fakePort)
	f.job(job).port = p
	return nil
}

func (f *fakeHost) jobAccounting(job handle) (accounting, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("jobAccounting"); err != nil {
		return accounting{}, err
	}
	j := f.job(job)
	return accounting{TotalUserTime: 30, TotalKernelTime: 12, TotalProcesses: j.total, ActiveProcesses: uint32(len(j.active))}, nil
}

func (f *fakeHost) jobIO(job handle) (ioCounters, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.job(job)
	return ioCounters{ReadOperations: 4, ReadBytes: 4096, WriteOperations: 2, WriteBytes: 512}, f.callLocked("jobIO")
}

func (f *fakeHost) peakJobMemory(job handle) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.job(job)
	return 1 << 20, f.callLocked("peakJobMemory")
}

// jobMemory is the job's commit: what its processes' records say they
// have committed, unless the test set the job's own figure.
func (f *fakeHost) jobMemory(job handle) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.job(job)
	if err := f.callLocked("jobMemory"); err != nil {
		return 0, err
	}
	if f.jobCommit != 0 {
		return f.jobCommit, nil
	}
	return 1000 * uint64(len(j.active)), nil
}

func (f *fakeHost) jobProcessIDs(job handle) ([]uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("jobProcessIDs"); err != nil {
		return nil, err
	}
	var pids []uint32
	for pid := range f.job(job).active {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, k int) bool { return pids[i] < pids[k] })
	return pids, nil
}

func (f *fakeHost) terminateJobObject(job handle, code uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("terminateJobObject", strconv.Itoa(int(code))); err != nil {
		return err
	}
	for _, p := range f.job(job).active {
		f.exitLocked(p, code)
	}
	return nil
}

func (f *fakeHost) assignProcessToJobObject(job, process handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("assignProcessToJobObject"); err != nil {
		return err
	}
	j, p := f.job(job), f.get(process).(*fakeProc)
	p.job = j
	j.active[p.pid] = p
	j.total++
	if j.port != nil {
		j.port.msgs <- jobKey
	}
	return nil
}

func (f *fakeHost) createCompletionPort() (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("createCompletionPort"); err != nil {
		return 0, err
	}
	return f.newHandle(&fakePort{msgs: make(chan uintptr, 1000)}), nil
}

func (f *fakeHost) jobMessage(port handle, timeoutMs uint32) (uint32, uintptr, error) {
	f.mu.Lock()
	p, _ := f.get(port).(*fakePort)
	err := f.callLocked("jobMessage")
	f.mu.Unlock()
	if err != nil {
		return 0, 0, err
	}
	select {
	case key := <-p.msgs:
		return msgExitProcess, key, nil
	case <-time.After(time.Duration(timeoutMs) * time.Millisecond):
		return 0, 0, errTimeout
	}
}

func (f *fakeHost) postMessage(port handle, key uintptr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("postMessage"); err != nil {
		return err
	}
	f.get(port).(*fakePort).msgs <- key
	return nil
}

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

func (f *fakeHost) closeHandle(h handle) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(h)
	if err := f.callLocked("closeHandle"); err != nil {
		return err
	}
	f.closeLocked(h)
	return nil
}

// closeLocked closes h; a job's last handle kills its processes when the
// job kills on close.
func (f *fakeHost) closeLocked(h handle) {
	if j, ok := f.handles[h].(*fakeJob); ok {
		j.handles--
		if j.handles == 0 {
			if j.flags&limitKillOnClose != 0 {
				for _, p := range j.active {
					f.exitLocked(p, 0)
				}
			}
			delete(f.jobs, j.name)
		}
	}
	delete(f.handles, h)
	f.closed[h] = true
}

func (f *fakeHost) logonUser(user, domain, password string, logonType uint32) (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("logonUser", domain+`\`+user, strconv.Itoa(int(logonType))); err != nil {
		return 0, err
	}
	if strings.EqualFold(domain, "NT AUTHORITY") && (!serviceAccounts[strings.ToLower(user)] || logonType != logonService) {
		return 0, errorLogonFailure
	}
	return f.newHandle(fakeToken(domain + `\` + user)), nil
}

// serviceAccounts are the NT AUTHORITY names a service logon takes, as
// Windows compares account names, without case: the accounts' own names
// (LookupAccountSid of S-1-5-19 and S-1-5-20) and the names services are
// configured with (CreateServiceW's lpServiceStartName).
var serviceAccounts = map[string]bool{"local service": true, "localservice": true, "network service": true, "networkservice": true}

func (f *fakeHost) processToken() (handle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("processToken"); err != nil {
		return 0, err
	}
	return f.newHandle(fakeToken("shim")), nil
}

func (f *fakeHost) tokenUser(token handle) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.get(token)
	return f.ownSID, f.callLocked("tokenUser")
}

func (f *fakeHost) userEnvironment(token handle) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.get(token).(fakeToken)
	if err := f.callLocked("userEnvironment"); err != nil {
		return nil, err
	}
	return append(append([]string(nil), f.profile...), "USERNAME="+string(t)), nil
}

func (f *fakeHost) localGroupExists(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.groups[strings.ToLower(name)], f.callLocked("localGroupExists", name)
}

func (f *fakeHost) addUser(name, password string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("addUser", name); err != nil {
		return err
	}
	if len(name) > 20 || len(password) < 14 {
		f.t.Errorf("user %q (at most 20 characters), password of %d characters", name, len(password))
	}
	if _, ok := f.users[name]; ok {
		return nerrUserExists
	}
	f.users[name] = ""
	return nil
}

func (f *fakeHost) addGroupMember(group, user string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("addGroupMember", group, user); err != nil {
		return err
	}
	f.users[user] = group
	return nil
}

func (f *fakeHost) deleteUser(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("deleteUser", name); err != nil {
		return err
	}
	if _, ok := f.users[name]; !ok {
		return errUserNotFound
	}
	delete(f.users, name)
	return nil
}

func (f *fakeHost) setVolumeMountPoint(dir, volume string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("setVolumeMountPoint", dir, volume); err != nil {
		return err
	}
	if !strings.HasSuffix(dir, `\`) || !f.files[strings.ToLower(strings.TrimSuffix(dir, `\`))] {
		f.t.Errorf("mount point %q: not an existing directory with a trailing backslash", dir)
	}
	dir = strings.TrimSuffix(dir, `\`)
	f.mounts[strings.ToLower(dir)] = volume
	for _, p := range f.image {
		f.addPathLocked(hostprocess.Join(dir, p), false)
	}
	return nil
}

func (f *fakeHost) deleteVolumeMountPoint(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("deleteVolumeMountPoint", dir); err != nil {
		return err
	}
	key := strings.ToLower(strings.TrimSuffix(dir, `\`))
	if _, ok := f.mounts[key]; !ok {
		return errorNotAReparsePoint
	}
	delete(f.mounts, key)
	for p := range f.files {
		if strings.HasPrefix(p, key+`\`) {
			delete(f.files, p)
		}
	}
	return nil
}

func (f *fakeHost) activeProcessors() uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.callLocked("activeProcessors")
	return f.cpus
}

func (f *fakeHost) windowsDirectory() (string, error) {
	return `C:\Windows`, f.call("windowsDirectory")
}

// The layer functions.

func (f *fakeHost) Activate(path string) error { return f.call("activate", path) }
func (f *fakeHost) Prepare(path string, parents []string) error {
	return f.call("prepare", append([]string{path}, parents...)...)
}
func (f *fakeHost) MountPath(path string) (string, error) {
	if err := f.call("mountPath", path); err != nil {
		return "", err
	}
	return f.volume, nil
}
func (f *fakeHost) Unprepare(path string) error  { return f.call("unprepare", path) }
func (f *fakeHost) Deactivate(path string) error { return f.call("deactivate", path) }
func (f *fakeHost) Expand(path string, size uint64) error {
	return f.call("expand", path, strconv.FormatUint(size, 10))
}

// The file system.

func (f *fakeHost) addPathLocked(p string, dir bool) {
	p = strings.ToLower(p)
	f.files[p] = dir
	for i := strings.LastIndex(p, `\`); i > 2; i = strings.LastIndex(p[:i], `\`) {
		f.files[p[:i]] = true
	}
}

func (f *fakeHost) isFile(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	dir, ok := f.files[strings.ToLower(path)]
	return ok && !dir
}

func (f *fakeHost) isDir(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[strings.ToLower(path)]
}

func (f *fakeHost) mkdirAll(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("mkdirAll", path); err != nil {
		return err
	}
	f.addPathLocked(path, true)
	return nil
}

func (f *fakeHost) symlink(target, link string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("symlink", target, link); err != nil {
		return err
	}
	if _, ok := f.files[strings.ToLower(link)]; ok {
		return errorAlreadyExists
	}
	f.links[strings.ToLower(link)] = target
	f.addPathLocked(link, true)
	return nil
}

func (f *fakeHost) isLink(path string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.links[strings.ToLower(path)]
	return ok
}

func (f *fakeHost) remove(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.callLocked("remove", path); err != nil {
		return err
	}
	key := strings.ToLower(path)
	if _, ok := f.files[key]; !ok {
		return errorFileNotFound
	}
	delete(f.files, key)
	delete(f.links, key)
	return nil
}

func (f *fakeHost) facts(err error) errFacts { return errnoFacts(err) }

// testBackend is a backend over a fake host, with short timings and a
// state directory of its own.
func testBackend(t *testing.T) (*Backend, *fakeHost) {
	t.Helper()
	return testBackendOn(t, newFakeHost(t))
}

func testBackendOn(t *testing.T, f *fakeHost) (*Backend, *fakeHost) {
	t.Helper()
	b := newBackend(f, Options{StateDir: winetest.TempDir(t)})
	b.messageTimeout = 50 * time.Millisecond
	b.pollInterval = 5 * time.Millisecond
	b.drain = 100 * time.Millisecond
	b.scratch.RetryDelay = time.Millisecond
	return b, f
}

// within and notWithin wait as every package's tests do.
var within, notWithin = testwait.Within, testwait.NotWithin
