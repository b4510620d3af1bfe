package hcs

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// The fake of hcsshim behaves as hcsshim's public API does where the
// backend depends on it: Shutdown and Terminate answer a pending error on
// success, Close ends Wait with an already-closed error, Kill of an exited
// process is already-stopped, Stdio hands over the requested pipes.

var errFakeClosed = errors.New("fake hcsshim: the handle has already been closed")

const (
	errPending        = syscall.Errno(0xC0370103)
	errSystemNotFound = syscall.Errno(0xC037010E)
	errAlreadyStopped = syscall.Errno(0xC0370110)
	errElementMissing = syscall.Errno(0x490)
	errAlreadyExists  = syscall.Errno(0x8037010F)
	errInvalidState   = syscall.Errno(0xC0370105)
)

type fakeAPI struct {
	mu         sync.Mutex
	calls      []string
	existing   map[string]*fakeContainer // systems HCS has
	created    []*containerConfig
	fail       map[string][]error // errors to return, per call name, in turn
	mountPath  string
	namespaces map[string][]string
	build      uint16
	processors uint32 // GetActiveProcessorCount's answer
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{
		existing:   make(map[string]*fakeContainer),
		fail:       make(map[string][]error),
		mountPath:  `\\?\Volume{11111111-2222-3333-4444-555555555555}\`,
		namespaces: make(map[string][]string),
		build:      20348,
	}
}

// call records a call and returns the error queued for it, if any.
func (a *fakeAPI) call(name string, args ...string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := name
	if len(args) > 0 {
		c += " " + strings.Join(args, " ")
	}
	a.calls = append(a.calls, c)
	if q := a.fail[name]; len(q) > 0 {
		a.fail[name] = q[1:]
		return q[0]
	}
	return nil
}

func (a *fakeAPI) failNext(name string, errs ...error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[name] = append(a.fail[name], errs...)
}

func (a *fakeAPI) callList() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// layerCalls are the calls that touch layers, in order.
func (a *fakeAPI) layerCalls() []string {
	var out []string
	for _, c := range a.callList() {
		name, _, _ := strings.Cut(c, " ")
		switch name {
		case "activate", "prepare", "mountPath", "unprepare", "deactivate":
			out = append(out, name)
		}
	}
	return out
}

func (a *fakeAPI) createContainer(id string, c *containerConfig) (hcsContainer, error) {
	if err := a.call("create", id); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.existing[id]; ok {
		return nil, errAlreadyExists
	}
	a.created = append(a.created, c)
	fc := newFakeContainer(a, id)
	a.existing[id] = fc
	return fc, nil
}

func (a *fakeAPI) openContainer(id string) (hcsContainer, error) {
	if err := a.call("open", id); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fc, ok := a.existing[id]
	if !ok {
		return nil, fmt.Errorf("hcs::OpenComputeSystem %s: %w", id, errSystemNotFound)
	}
	// Another handle on the same system: it shares the system's stop.
	return fc.handle(), nil
}

func (a *fakeAPI) layerID(name string) (string, error) {
	if err := a.call("layerID", name); err != nil {
		return "", err
	}
	return "guid-of-" + name, nil
}

func (a *fakeAPI) activateLayer(path string) error { return a.call("activate", path) }

func (a *fakeAPI) prepareLayer(path string, parents []string) error {
	return a.call("prepare", append([]string{path}, parents...)...)
}

func (a *fakeAPI) layerMountPath(path string) (string, error) {
	if err := a.call("mountPath", path); err != nil {
		return "", err
	}
	return a.mountPath, nil
}

func (a *fakeAPI) unprepareLayer(path string) error  { return a.call("unprepare", path) }
func (a *fakeAPI) deactivateLayer(path string) error { return a.call("deactivate", path) }

func (a *fakeAPI) namespaceEndpoints(ns string) ([]string, error) {
	if err := a.call("namespace", ns); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	eps, ok := a.namespaces[ns]
	if !ok {
		return nil, fmt.Errorf("namespace %s not found: %w", ns, errElementMissing)
	}
	return eps, nil
}

func (a *fakeAPI) hostBuild() uint16 { return a.build }

func (a *fakeAPI) activeProcessors() uint32 { return a.processors }

func (a *fakeAPI) facts(err error) errFacts {
	f := errnoFacts(err)
	f.AlreadyClosed = errors.Is(err, errFakeClosed)
	return f
}

// fakeSystem is the state HCS keeps for one system, shared by its handles.
type fakeSystem struct {
	mu      sync.Mutex
	stopped chan struct{}
	stopErr error
	stats   statistics
	list    []processListItem
	procs   []*fakeProcess
	// stopOnShutdown makes Shutdown and Terminate stop the system.
	stopOnShutdown bool
}

func (s *fakeSystem) stop(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stopped:
	default:
		s.stopErr = err
		close(s.stopped)
	}
}

func (s *fakeSystem) isStopped() bool {
	select {
	case <-s.stopped:
		return true
	default:
		return false
	}
}

// fakeContainer is one handle on a fakeSystem.
type fakeContainer struct {
	api    *fakeAPI
	id     string
	sys    *fakeSystem
	closed chan struct{}
	once   sync.Once
}

func newFakeContainer(a *fakeAPI, id string) *fakeContainer {
	return &fakeContainer{api: a, id: id, sys: &fakeSystem{stopped: make(chan struct{}), stopOnShutdown: true}, closed: make(chan struct{})}
}

func (c *fakeContainer) handle() *fakeContainer {
	return &fakeContainer{api: c.api, id: c.id, sys: c.sys, closed: make(chan struct{})}
}

func (c *fakeContainer) Start() error { return c.api.call("start", c.id) }

func (c *fakeContainer) stopCall(name string) error {
	if err := c.api.call(name, c.id); err != nil {
		return err
	}
	if c.sys.isStopped() {
		// hcsshim returns nil internally for a stopped system, and the
		// public wrapper turns that into pending.
		return errPending
	}
	if c.sys.stopOnShutdown {
		go c.sys.stop(nil)
	}
	return errPending
}

func (c *fakeContainer) Shutdown() error  { return c.stopCall("shutdown") }
func (c *fakeContainer) Terminate() error { return c.stopCall("terminate") }

func (c *fakeContainer) Wait() error {
	select {
	case <-c.sys.stopped:
		c.sys.mu.Lock()
		defer c.sys.mu.Unlock()
		return c.sys.stopErr
	case <-c.closed:
		return errFakeClosed
	}
}

func (c *fakeContainer) Statistics() (statistics, error) {
	if err := c.api.call("statistics", c.id); err != nil {
		return statistics{}, err
	}
	return c.sys.stats, nil
}

func (c *fakeContainer) ProcessList() ([]processListItem, error) {
	if err := c.api.call("processList", c.id); err != nil {
		return nil, err
	}
	return c.sys.list, nil
}

func (c *fakeContainer) CreateProcess(pc *processConfig) (hcsProcess, error) {
	if err := c.api.call("createProcess", c.id, pc.CommandLine); err != nil {
		return nil, err
	}
	c.sys.mu.Lock()
	defer c.sys.mu.Unlock()
	p := newFakeProcess(c.api, 100+len(c.sys.procs), pc)
	c.sys.procs = append(c.sys.procs, p)
	return p, nil
}

func (c *fakeContainer) Close() error {
	if err := c.api.call("close", c.id); err != nil {
		return err
	}
	c.once.Do(func() { close(c.closed) })
	return nil
}

// fakeProcess is an HCS process with pipes: the test writes the process's
// output to stdoutW and stderrW, and reads its input from stdinR.
type fakeProcess struct {
	api    *fakeAPI
	pid    int
	config *processConfig

	stdinR           *io.PipeReader
	stdinW           *io.PipeWriter
	stdoutR, stderrR *io.PipeReader
	stdoutW, stderrW *io.PipeWriter

	mu         sync.Mutex
	exitedCh   chan struct{}
	code       int
	waitErr    error
	closedCh   chan struct{}
	closeOnce  sync.Once
	kills      int
	killExits  bool // Kill ends the process with code 1
	stdinClose int
	resized    [][2]uint16
}

func newFakeProcess(a *fakeAPI, pid int, pc *processConfig) *fakeProcess {
	p := &fakeProcess{api: a, pid: pid, config: pc, exitedCh: make(chan struct{}), closedCh: make(chan struct{}), killExits: true}
	p.stdinR, p.stdinW = io.Pipe()
	p.stdoutR, p.stdoutW = io.Pipe()
	p.stderrR, p.stderrW = io.Pipe()
	return p
}

func (p *fakeProcess) exit(code int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.exitedCh:
	default:
		p.code, p.waitErr = code, err
		close(p.exitedCh)
	}
}

func (p *fakeProcess) hasExited() bool {
	select {
	case <-p.exitedCh:
		return true
	default:
		return false
	}
}

func (p *fakeProcess) Pid() int { return p.pid }

func (p *fakeProcess) Kill() error {
	if err := p.api.call("kill", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	if p.hasExited() {
		return errAlreadyStopped
	}
	p.mu.Lock()
	p.kills++
	exits := p.killExits
	p.mu.Unlock()
	if exits {
		go p.exit(1, nil)
	}
	return nil
}

func (p *fakeProcess) Wait() error {
	select {
	case <-p.exitedCh:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waitErr
	case <-p.closedCh:
		return errFakeClosed
	}
}

func (p *fakeProcess) ExitCode() (int, error) {
	select {
	case <-p.exitedCh:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.waitErr != nil {
			return -1, p.waitErr
		}
		return p.code, nil
	case <-p.closedCh:
		return -1, errFakeClosed
	default:
		return -1, errors.New("fake: the process is in an invalid state for the attempted operation")
	}
}

func (p *fakeProcess) ResizeConsole(w, h uint16) error {
	if err := p.api.call("resize", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resized = append(p.resized, [2]uint16{w, h})
	return nil
}

func (p *fakeProcess) Stdio() (io.WriteCloser, io.ReadCloser, io.ReadCloser, error) {
	if err := p.api.call("stdio", fmt.Sprint(p.pid)); err != nil {
		return nil, nil, nil, err
	}
	var in io.WriteCloser
	var out, errOut io.ReadCloser
	if p.config.CreateStdInPipe {
		in = p.stdinW
	}
	if p.config.CreateStdOutPipe {
		out = p.stdoutR
	}
	if p.config.CreateStdErrPipe {
		errOut = p.stderrR
	}
	return in, out, errOut, nil
}

func (p *fakeProcess) CloseStdin() error {
	if err := p.api.call("closeStdin", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdinClose++
	return nil
}

func (p *fakeProcess) Close() error {
	if err := p.api.call("closeProcess", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	p.closeOnce.Do(func() { close(p.closedCh) })
	return nil
}

// testBackend is a backend over a fake hcsshim with short timings.
func testBackend(t *testing.T) (*Backend, *fakeAPI) {
	t.Helper()
	a := newFakeAPI()
	b := newBackend(a, Options{StateDir: winetest.TempDir(t), DrainTimeout: 200 * time.Millisecond})
	b.lostProcessTimeout = 200 * time.Millisecond
	b.closeWaitTimeout = time.Second
	b.layerRetryDelay = time.Millisecond
	return b, a
}

// within fails the test unless ch closes within a second.
func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(2 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// notWithin fails the test if ch closes within d.
func notWithin(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s happened too early", what)
	case <-time.After(d):
	}
}
