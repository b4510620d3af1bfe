package hcs

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/testwait"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// The fake of HCS is a binding: it behaves as computecore.dll does where
// the core depends on it. Operations complete on a goroutine of their own,
// after the call that started them returned; exits arrive as
// notifications through hcsEvents, also asynchronously; a handle closed
// still may receive a notification (the core must drop it).

const (
	errSystemNotFound = syscall.Errno(0xC037010E)
	errAlreadyStopped = syscall.Errno(0xC0370110)
	errProcessStopped = syscall.Errno(0x8037011F)
	errAlreadyExists  = syscall.Errno(0x8037010F)
	errInvalidState   = syscall.Errno(0xC0370105)
)

type fakeAPI struct {
	*computeCore
	hcs *fakeHCS

	mu         sync.Mutex
	calls      []string
	existing   map[string]*fakeSystem // systems HCS has
	created    []*schema2.ComputeSystem
	fail       map[string][]error // errors the named call returns, in turn
	failLater  map[string][]error // errors the named call's operation completes with
	mountPath  string
	build      uint16
	processors uint32 // GetActiveProcessorCount's answer
	ccg        map[string]string
	held       map[string]chan struct{} // operations that complete only once released
	faults     map[string]*activeFault  // the fault plan (faultplan_test.go)
}

func newFakeAPI() *fakeAPI {
	a := &fakeAPI{
		existing:  make(map[string]*fakeSystem),
		fail:      make(map[string][]error),
		failLater: make(map[string][]error),
		mountPath: `\\?\Volume{11111111-2222-3333-4444-555555555555}\`,
		build:     20348,
		ccg:       make(map[string]string),
		held:      make(map[string]chan struct{}),
	}
	a.hcs = &fakeHCS{api: a, handles: make(map[hcsHandle]any), closed: make(map[hcsHandle]bool), busy: make(map[hcsHandle]chan struct{})}
	a.computeCore = &computeCore{api: a.hcs}
	return a
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
	if f := a.faults[name]; f != nil && f.call != nil {
		return f.call
	}
	return nil
}

// later is the error queued for the operation of call name.
func (a *fakeAPI) later(name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if q := a.failLater[name]; len(q) > 0 {
		a.failLater[name] = q[1:]
		return q[0]
	}
	return nil
}

func (a *fakeAPI) failNext(name string, errs ...error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[name] = append(a.fail[name], errs...)
}

func (a *fakeAPI) failOperation(name string, errs ...error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failLater[name] = append(a.failLater[name], errs...)
}

// hold keeps the operations of call name from completing until the
// returned release is called (or HCS cancels them).
func (a *fakeAPI) hold(name string) (release func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	a.held[name] = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (a *fakeAPI) heldChan(name string) chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.held[name]
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
		case "activate", "prepare", "mountPath", "unprepare", "deactivate", "expand":
			out = append(out, name)
		}
	}
	return out
}

func (a *fakeAPI) layerID(name string) (string, error) {
	if err := a.call("layerID", name); err != nil {
		return "", err
	}
	return "guid-of-" + name, nil
}

func (a *fakeAPI) Activate(path string) error { return a.call("activate", path) }

func (a *fakeAPI) Prepare(path string, parents []string) error {
	return a.call("prepare", append([]string{path}, parents...)...)
}

func (a *fakeAPI) MountPath(path string) (string, error) {
	if err := a.call("mountPath", path); err != nil {
		return "", err
	}
	return a.mountPath, nil
}

func (a *fakeAPI) Unprepare(path string) error  { return a.call("unprepare", path) }
func (a *fakeAPI) Deactivate(path string) error { return a.call("deactivate", path) }

func (a *fakeAPI) Expand(path string, size uint64) error {
	return a.call("expand", path, fmt.Sprint(size))
}

func (a *fakeAPI) resolvePath(path string) (string, error) {
	if err := a.call("resolve", path); err != nil {
		return "", err
	}
	return `\\?\resolved\` + path, nil
}

func (a *fakeAPI) hostBuild() uint16 { return a.build }

func (a *fakeAPI) activeProcessors() uint32 { return a.processors }

func (a *fakeAPI) facts(err error) errFacts { return coreFacts(err) }

// fakeHCS is the fake binding.
type fakeHCS struct {
	api *fakeAPI

	mu      sync.Mutex
	next    hcsHandle
	handles map[hcsHandle]any // *fakeOp, *fakeSystem, *fakeProcess
	// closed are system and process handles closed: HCS faults on a
	// handle used after (or while) it closes, and the fake records each
	// such use in misuse.
	closed map[hcsHandle]bool
	misuse []string
	// busy holds a process handle's queue while a console event that the
	// process holds is in flight on it: HCS serializes the calls on one
	// handle, and a terminate sent on it waits until the event is done.
	busy map[hcsHandle]chan struct{}
	// Operations done; the goroutines that complete them.
	wg sync.WaitGroup
}

type fakeOp struct {
	target   hcsHandle   // the system or process handle the operation is on
	sys      *fakeSystem // the system a create or start is of
	done     chan struct{}
	canceled chan struct{}
	doc      string
	err      error
	pipes    processPipes
}

func (h *fakeHCS) add(v any) hcsHandle {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.next++
	h.handles[h.next] = v
	return h.next
}

func (h *fakeHCS) get(x hcsHandle) any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed[x] {
		h.misuse = append(h.misuse, fmt.Sprintf("handle %d used after it was closed", x))
	}
	return h.handles[x]
}

// release closes a system or process handle. The fake keeps what it
// pointed to, so a later use is recorded rather than a crash of the test.
func (h *fakeHCS) release(x hcsHandle) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed[x] {
		h.misuse = append(h.misuse, fmt.Sprintf("handle %d closed twice", x))
	}
	h.closed[x] = true
}

// misused is every use of a closed handle so far.
func (h *fakeHCS) misused() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.misuse...)
}

func (h *fakeHCS) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.handles) - len(h.closed)
}

// complete ends op on a goroutine of its own, as HCS does, with the
// operation failure queued for name, its fault's, or f's answer. An
// operation on a handle that closes while someone still waits for the
// operation (it is not closed yet) is a use after close.
func (h *fakeHCS) complete(op hcsHandle, name string, f func() (string, error)) {
	o := h.get(op).(*fakeOp)
	h.wg.Add(1)
	held := h.api.heldChan(name)
	flt := h.api.faultOf(name)
	go func() {
		defer h.wg.Done()
		time.Sleep(time.Millisecond)
		defer func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if _, waited := h.handles[op]; waited && o.target != 0 && h.closed[o.target] {
				h.misuse = append(h.misuse, fmt.Sprintf("handle %d closed during %s", o.target, name))
			}
		}()
		canceled := false
		if held != nil {
			select {
			case <-held:
			case <-o.canceled:
				canceled = true
			}
		}
		if canceled || flt.stalled(o) {
			o.err = syscall.Errno(0x80370118) // what a cancelled operation reports
			close(o.done)
			return
		}
		if flt != nil && flt.exit && o.sys != nil {
			o.sys.stop(flt.status)
		}
		if err := h.api.later(name); err != nil {
			o.err = err
			o.doc = `{"Error":-1,"ErrorMessage":"fake HCS failed ` + name + `"}`
		} else if flt != nil && flt.op != nil {
			o.err = flt.op
			o.doc = `{"Error":-1,"ErrorMessage":"fake HCS fault in ` + name + `"}`
		} else if f != nil {
			o.doc, o.err = f()
		}
		close(o.done)
	}()
}

func (h *fakeHCS) createOperation() (hcsHandle, error) {
	if err := h.api.call("createOperation"); err != nil {
		return 0, err
	}
	return h.add(&fakeOp{done: make(chan struct{}), canceled: make(chan struct{})}), nil
}

func (h *fakeHCS) closeOperation(op hcsHandle) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.handles, op)
}

func (h *fakeHCS) waitOperation(op hcsHandle, timeoutMs uint32) (string, error) {
	o := h.get(op).(*fakeOp)
	<-o.done
	return o.doc, o.err
}

// waitOperationProcess hands over no pipes with a failure, as
// HcsWaitForOperationResultAndProcessInfo leaves its information empty.
func (h *fakeHCS) waitOperationProcess(op hcsHandle, timeoutMs uint32) (processPipes, string, error) {
	o := h.get(op).(*fakeOp)
	<-o.done
	if o.err != nil {
		return processPipes{}, o.doc, o.err
	}
	return o.pipes, o.doc, o.err
}

func (h *fakeHCS) operationResult(op hcsHandle) (string, error) { return "", nil }

func (h *fakeHCS) cancelOperation(op hcsHandle) error {
	if err := h.api.call("cancel"); err != nil {
		return err
	}
	o := h.get(op).(*fakeOp)
	select {
	case <-o.canceled:
	default:
		close(o.canceled)
	}
	return nil
}

func (h *fakeHCS) createComputeSystem(id, doc string, op hcsHandle) (hcsHandle, error) {
	if err := h.api.call("create", id); err != nil {
		return 0, err
	}
	a := h.api
	a.mu.Lock()
	_, exists := a.existing[id]
	var cs schema2.ComputeSystem
	if err := json.Unmarshal([]byte(doc), &cs); err != nil {
		a.mu.Unlock()
		return 0, err
	}
	var sys *fakeSystem
	if !exists {
		a.created = append(a.created, &cs)
		sys = newFakeSystem(h, id)
		sys.owner = cs.Owner
		a.existing[id] = sys
	}
	a.mu.Unlock()
	if exists {
		h.complete(op, "create", func() (string, error) { return "", errAlreadyExists })
		return 0, nil
	}
	x := h.add(sys)
	h.get(op).(*fakeOp).sys = sys
	h.complete(op, "create", nil)
	return x, nil
}

func (h *fakeHCS) openComputeSystem(id string) (hcsHandle, error) {
	if err := h.api.call("open", id); err != nil {
		return 0, err
	}
	h.api.mu.Lock()
	sys, ok := h.api.existing[id]
	h.api.mu.Unlock()
	if !ok {
		return 0, errSystemNotFound
	}
	return h.add(sys), nil
}

func (h *fakeHCS) closeComputeSystem(x hcsHandle) {
	sys := h.get(x).(*fakeSystem)
	h.api.call("close", sys.id)
	h.release(x)
}

func (h *fakeHCS) system(x hcsHandle) *fakeSystem { return h.get(x).(*fakeSystem) }

// on marks op as an operation on the handle x.
func (h *fakeHCS) on(op, x hcsHandle) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handles[op].(*fakeOp).target = x
}

func (h *fakeHCS) startComputeSystem(x, op hcsHandle) error {
	sys := h.system(x)
	if err := h.api.call("start", sys.id); err != nil {
		return err
	}
	h.on(op, x)
	h.get(op).(*fakeOp).sys = sys
	h.complete(op, "start", func() (string, error) {
		if sys.isStopped() {
			return "", errInvalidState
		}
		return "", nil
	})
	return nil
}

func (h *fakeHCS) stopCall(name string, x, op hcsHandle) error {
	sys := h.system(x)
	if err := h.api.call(name, sys.id); err != nil {
		return err
	}
	h.complete(op, name, func() (string, error) {
		if sys.isStopped() {
			return "", errAlreadyStopped
		}
		if sys.stopOnShutdown {
			sys.stop(nil)
		}
		return "", nil
	})
	return nil
}

func (h *fakeHCS) shutDownComputeSystem(x, op hcsHandle) error {
	return h.stopCall("shutdown", x, op)
}

func (h *fakeHCS) terminateComputeSystem(x, op hcsHandle) error {
	return h.stopCall("terminate", x, op)
}

func (h *fakeHCS) modifyComputeSystem(x, op hcsHandle, doc string) error {
	sys := h.system(x)
	if err := h.api.call("modify", sys.id); err != nil {
		return err
	}
	h.on(op, x)
	sys.mu.Lock()
	sys.modifies = append(sys.modifies, doc)
	sys.mu.Unlock()
	h.complete(op, "modify", nil)
	return nil
}

func (h *fakeHCS) getComputeSystemProperties(x, op hcsHandle, query string) error {
	sys := h.system(x)
	var q schema2.PropertyQuery
	if query != "" {
		if err := json.Unmarshal([]byte(query), &q); err != nil {
			return err
		}
	}
	name := "properties"
	for _, t := range q.PropertyTypes {
		name = map[string]string{schema2.PropertyStatistics: "statistics", schema2.PropertyProcessList: "processList"}[t]
	}
	if err := h.api.call(name, sys.id); err != nil {
		return err
	}
	h.on(op, x)
	h.complete(op, name, func() (string, error) {
		sys.mu.Lock()
		defer sys.mu.Unlock()
		p := schema2.Properties{Id: sys.id, Stopped: sys.isStopped()}
		for _, t := range q.PropertyTypes {
			switch t {
			case schema2.PropertyStatistics:
				st := sys.stats
				p.Statistics = &st
			case schema2.PropertyProcessList:
				p.ProcessList = sys.list
			}
		}
		b, err := json.Marshal(p)
		return string(b), err
	})
	return nil
}

// enumerateComputeSystems lists the systems of the query's owners that
// have not stopped: HCS forgets a stopped system with its last handle,
// and the fake's users close theirs.
func (h *fakeHCS) enumerateComputeSystems(query string, op hcsHandle) error {
	if err := h.api.call("enumerate"); err != nil {
		return err
	}
	var q struct{ Owners []string }
	if err := json.Unmarshal([]byte(query), &q); err != nil {
		return err
	}
	h.complete(op, "enumerate", func() (string, error) {
		h.api.mu.Lock()
		defer h.api.mu.Unlock()
		list := []systemSummary{}
		for _, sys := range h.api.existing {
			if !sys.isStopped() && slices.Contains(q.Owners, sys.owner) {
				list = append(list, systemSummary{Id: sys.id, Owner: sys.owner, State: "Running", SystemType: "Container"})
			}
		}
		b, err := json.Marshal(list)
		return string(b), err
	})
	return nil
}

func (h *fakeHCS) setComputeSystemCallback(x hcsHandle, key uintptr) error {
	sys := h.system(x)
	sys.mu.Lock()
	defer sys.mu.Unlock()
	sys.keys = append(sys.keys, key)
	return nil
}

func (h *fakeHCS) createProcess(x hcsHandle, params string, op hcsHandle) (hcsHandle, error) {
	sys := h.system(x)
	var pp schema2.ProcessParameters
	if err := json.Unmarshal([]byte(params), &pp); err != nil {
		return 0, err
	}
	if err := h.api.call("createProcess", sys.id, pp.CommandLine); err != nil {
		return 0, err
	}
	sys.mu.Lock()
	p := newFakeProcess(h, 100+len(sys.procs), &pp)
	sys.procs = append(sys.procs, p)
	sys.mu.Unlock()
	h.on(op, x)
	h.get(op).(*fakeOp).pipes = p.info()
	h.complete(op, "createProcess", nil)
	return h.add(p), nil
}

// info is the process's id and the pipes its parameters asked for.
func (p *fakeProcess) info() processPipes {
	pp := processPipes{pid: uint32(p.pid)}
	if p.config.CreateStdInPipe {
		pp.stdin = p.stdinW
	}
	if p.config.CreateStdOutPipe {
		pp.stdout = p.stdoutR
	}
	if p.config.CreateStdErrPipe {
		pp.stderr = p.stderrR
	}
	return pp
}

func (h *fakeHCS) openProcess(x hcsHandle, pid uint32) (hcsHandle, error) {
	sys := h.system(x)
	if err := h.api.call("openProcess", sys.id, fmt.Sprint(pid)); err != nil {
		return 0, err
	}
	sys.mu.Lock()
	defer sys.mu.Unlock()
	for _, p := range sys.procs {
		if p.pid == int(pid) && !p.hasExited() {
			return h.add(p), nil
		}
	}
	return 0, errProcessStopped
}

func (h *fakeHCS) getProcessInfo(x, op hcsHandle) error {
	p := h.process(x)
	if err := h.api.call("processInfo", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	h.on(op, x)
	h.get(op).(*fakeOp).pipes = p.info()
	h.complete(op, "processInfo", nil)
	return nil
}

func (h *fakeHCS) process(x hcsHandle) *fakeProcess { return h.get(x).(*fakeProcess) }

func (h *fakeHCS) closeProcess(x hcsHandle) {
	p := h.process(x)
	h.api.call("closeProcess", fmt.Sprint(p.pid))
	h.release(x)
}

// queue returns the handle's queue: nil when it is free, or a channel
// closed once the call holding it is done.
func (h *fakeHCS) queue(x hcsHandle) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.busy[x]
}

func (h *fakeHCS) signalProcess(x, op hcsHandle, options string) error {
	p := h.process(x)
	var o schema2.SignalProcessOptions
	if err := json.Unmarshal([]byte(options), &o); err != nil {
		return err
	}
	if err := h.api.call("signal", fmt.Sprint(p.pid), o.Signal); err != nil {
		return err
	}
	h.on(op, x)
	f := h.api.faultOf("signal")
	holds := f != nil && f.hold
	var free chan struct{}
	if holds {
		free = make(chan struct{})
		h.mu.Lock()
		h.busy[x] = free
		h.mu.Unlock()
	}
	h.complete(op, "signal", func() (string, error) {
		if p.hasExited() {
			return "", errProcessStopped
		}
		p.mu.Lock()
		p.signals = append(p.signals, o.Signal)
		exits := p.signalExits
		p.mu.Unlock()
		if exits {
			p.exit(0, nil)
		}
		if free != nil {
			// The process's handler does not return: the call ends
			// with the process.
			<-p.exitedCh
			h.mu.Lock()
			delete(h.busy, x)
			h.mu.Unlock()
			close(free)
		}
		return "", nil
	})
	return nil
}

func (h *fakeHCS) terminateProcess(x, op hcsHandle) error {
	p := h.process(x)
	if err := h.api.call("kill", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	if p.hasExited() {
		return errProcessStopped
	}
	p.mu.Lock()
	p.kills++
	exits := p.killExits
	p.mu.Unlock()
	h.on(op, x)
	queue := h.queue(x)
	h.complete(op, "kill", func() (string, error) {
		if queue != nil {
			<-queue // behind the call that holds the handle
		}
		if exits {
			p.exit(1, nil)
		}
		return "", nil
	})
	return nil
}

func (h *fakeHCS) modifyProcess(x, op hcsHandle, doc string) error {
	p := h.process(x)
	var req schema2.ProcessModifyRequest
	if err := json.Unmarshal([]byte(doc), &req); err != nil {
		return err
	}
	name := map[string]string{schema2.OperationConsoleSize: "resize", schema2.OperationCloseHandle: "closeStdin"}[req.Operation]
	if err := h.api.call(name, fmt.Sprint(p.pid)); err != nil {
		return err
	}
	h.on(op, x)
	p.mu.Lock()
	switch req.Operation {
	case schema2.OperationConsoleSize:
		p.resized = append(p.resized, [2]uint16{req.ConsoleSize.Width, req.ConsoleSize.Height})
	case schema2.OperationCloseHandle:
		p.stdinClose++
	}
	p.mu.Unlock()
	h.complete(op, name, nil)
	return nil
}

func (h *fakeHCS) getProcessProperties(x, op hcsHandle) error {
	p := h.process(x)
	if err := h.api.call("processProperties", fmt.Sprint(p.pid)); err != nil {
		return err
	}
	h.on(op, x)
	h.complete(op, "processProperties", func() (string, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		b, err := json.Marshal(schema2.ProcessStatus{ProcessId: uint32(p.pid), Exited: p.hasExited(), ExitCode: uint32(p.code)})
		return string(b), err
	})
	return nil
}

func (h *fakeHCS) setProcessCallback(x hcsHandle, key uintptr) error {
	p := h.process(x)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, key)
	return nil
}

func (h *fakeHCS) modifyServiceSettings(doc string) error {
	var req struct {
		Settings struct {
			Operation        string
			OperationDetails struct{ Id, CredentialSpec string }
		}
	}
	if err := json.Unmarshal([]byte(doc), &req); err != nil {
		return err
	}
	op, d := req.Settings.Operation, req.Settings.OperationDetails
	if err := h.api.call("ccg"+op, d.Id); err != nil {
		return err
	}
	h.api.mu.Lock()
	defer h.api.mu.Unlock()
	if op == schema2.AddInstance {
		h.api.ccg[d.Id] = d.CredentialSpec
	} else {
		delete(h.api.ccg, d.Id)
	}
	return nil
}

func (h *fakeHCS) getServiceProperties(query string) (string, error) {
	h.api.mu.Lock()
	defer h.api.mu.Unlock()
	var info schema2.ContainerCredentialGuardSystemInfo
	for id, spec := range h.api.ccg {
		info.Instances = append(info.Instances, schema2.ContainerCredentialGuardInstance{Id: id, CredentialGuard: &schema2.ContainerCredentialGuardState{Cookie: "cookie-" + id, RpcEndpoint: "ep-" + id, Transport: "LRPC", CredentialSpec: spec}})
	}
	b, _ := json.Marshal(info)
	out, err := json.Marshal(schema2.ServiceProperties{Properties: []json.RawMessage{b}})
	return string(out), err
}

func (h *fakeHCS) setSiloAffinity(id string, a []groupAffinity) error {
	args := []string{id}
	for _, g := range a {
		args = append(args, fmt.Sprintf("%d:%#x", g.Group, g.Mask))
	}
	return h.api.call("affinity", args...)
}

// fakeSystem is the state HCS keeps for one system, shared by its handles.
type fakeSystem struct {
	h     *fakeHCS
	id    string
	owner string

	mu       sync.Mutex
	stopped  chan struct{}
	keys     []uintptr // the callbacks of its handles
	stats    schema2.Statistics
	list     []schema2.ProcessDetails
	procs    []*fakeProcess
	modifies []string
	// stopOnShutdown makes Shutdown and Terminate stop the system.
	stopOnShutdown bool
}

func newFakeSystem(h *fakeHCS, id string) *fakeSystem {
	return &fakeSystem{h: h, id: id, stopped: make(chan struct{}), stopOnShutdown: true}
}

// stop stops the system, and notifies every handle's callback: err, an
// HRESULT, is the exit status.
func (s *fakeSystem) stop(err error) {
	s.mu.Lock()
	select {
	case <-s.stopped:
		s.mu.Unlock()
		return
	default:
	}
	close(s.stopped)
	keys := append([]uintptr(nil), s.keys...)
	s.mu.Unlock()
	status := 0
	if e, ok := err.(syscall.Errno); ok {
		status = int(int32(uint32(e)))
	} else if err != nil {
		status = -1
	}
	s.h.api.notify("systemExited", keys, eventSystemExited, fmt.Sprintf(`{"Status":%d,"ExitType":"fake"}`, status))
}

func (s *fakeSystem) isStopped() bool {
	select {
	case <-s.stopped:
		return true
	default:
		return false
	}
}

// fakeProcess is an HCS process with pipes: the test writes the process's
// output to stdoutW and stderrW, and reads its input from stdinR.
type fakeProcess struct {
	h      *fakeHCS
	pid    int
	config *schema2.ProcessParameters

	stdinR           *io.PipeReader
	stdinW           *io.PipeWriter
	stdoutR, stderrR *io.PipeReader
	stdoutW, stderrW *io.PipeWriter

	mu          sync.Mutex
	exitedCh    chan struct{}
	code        int
	keys        []uintptr
	kills       int
	killExits   bool // Kill ends the process with code 1
	signals     []string
	signalExits bool // a console event ends the process with code 0
	stdinClose  int
	resized     [][2]uint16
}

func newFakeProcess(h *fakeHCS, pid int, pp *schema2.ProcessParameters) *fakeProcess {
	p := &fakeProcess{h: h, pid: pid, config: pp, exitedCh: make(chan struct{}), killExits: true}
	p.stdinR, p.stdinW = io.Pipe()
	p.stdoutR, p.stdoutW = io.Pipe()
	p.stderrR, p.stderrW = io.Pipe()
	return p
}

// exit ends the process with code; a non-nil err is HCS going away
// instead (a service disconnect).
func (p *fakeProcess) exit(code int, err error) {
	p.mu.Lock()
	select {
	case <-p.exitedCh:
		p.mu.Unlock()
		return
	default:
	}
	p.code = code
	close(p.exitedCh)
	keys := append([]uintptr(nil), p.keys...)
	p.mu.Unlock()
	if err == nil {
		p.h.api.notify("processExited", keys, eventProcessExited, fmt.Sprintf(`{"ProcessId":%d,"Exited":true,"ExitCode":%d}`, p.pid, uint32(code)))
		return
	}
	for _, k := range keys {
		go hcsEvents.deliver(k, eventServiceDisconnect, "")
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

// testBackend is a backend over a fake HCS with short timings.
func testBackend(t *testing.T) (*Backend, *fakeAPI) {
	t.Helper()
	a := newFakeAPI()
	b := newBackend(a, Options{StateDir: winetest.TempDir(t), DrainTimeout: 200 * time.Millisecond})
	b.lostProcessTimeout = 200 * time.Millisecond
	b.closeWaitTimeout = time.Second
	b.scratch.RetryDelay = time.Millisecond
	b.terminateRetry = 20 * time.Millisecond
	b.terminateGiveUp = time.Second
	b.exitNoticeWait = 50 * time.Millisecond
	t.Cleanup(func() {
		b.bg.Wait()
		a.computeCore.bg.Wait()
		a.hcs.wg.Wait()
		for _, m := range a.hcs.misused() {
			t.Errorf("HCS handle misused: %s", m)
		}
	})
	return b, a
}

// within and notWithin wait as every package's tests do.
var within, notWithin = testwait.Within, testwait.NotWithin
