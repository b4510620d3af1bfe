package jobcontainer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/testwait"
	"github.com/winproc/winproc/internal/winetest"
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
