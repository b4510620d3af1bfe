package hcs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// The backend's contract under HCS's faults (docs/architecture.md, "Under
// faults"), against the fake's fault plan (faultplan_test.go).

// faultPod is a started system with a running process, as a pod's
// container is when a fault hits it.
type faultPod struct {
	b   *Backend
	a   *fakeAPI
	sys compute.System
	fc  *fakeSystem
	p   compute.Process
	fp  *fakeProcess
}

func newFaultPod(t *testing.T) *faultPod {
	t.Helper()
	b, a, sys, fc := created(t)
	if err := sys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	p, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe", Terminal: true})
	if err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	fp := fc.procs[len(fc.procs)-1]
	fc.mu.Unlock()
	return &faultPod{b: b, a: a, sys: sys, fc: fc, p: p, fp: fp}
}

// remove tears the pod down as the shim does once the faults cleared,
// and checks that nothing is left: no system running, no handle open, no
// record, no operation left to HCS, no termination pending.
func (f *faultPod) remove(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := f.p.Close(); err != nil {
		t.Errorf("process Close = %v", err)
	}
	// NotFound: it has stopped; FailedPrecondition: the test closed it.
	if err := f.sys.Terminate(ctx); err != nil && !errdefs.IsNotFound(err) && !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Terminate = %v", err)
	}
	within(t, f.sys.Wait(), "the stop")
	if err := f.sys.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	f.settled(t)
	if recs, _ := f.b.records.read(f.sys.ID()); recs != nil {
		t.Errorf("record left: %+v", recs)
	}
}

// deleteAfterShim deletes the pod's system as the shim's delete does
// after the serving shim died: open, terminate, wait, close; then checks
// that nothing is left.
func (f *faultPod) deleteAfterShim(t *testing.T) {
	t.Helper()
	sys, err := f.b.Open(context.Background(), "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, sys.Wait(), "the stop")
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	f.settled(t)
	if rec, _ := f.b.records.read("ctr"); rec != nil {
		t.Errorf("record left: %+v", rec)
	}
}

func (f *faultPod) settled(t *testing.T) {
	t.Helper()
	settled(t, f.b, f.a)
}

// settled waits for the background work of the backend, the core and the
// fake, then checks that the fake's HCS has nothing of the test's left.
func settled(t *testing.T, b *Backend, a *fakeAPI) {
	t.Helper()
	b.bg.Wait()
	a.computeCore.bg.Wait()
	a.hcs.wg.Wait()
	if n := a.operationsLeft(); n != 0 {
		t.Errorf("%d operations left to HCS", n)
	}
	if ts := b.Terminations(); len(ts) != 0 {
		t.Errorf("terminations pending: %+v", ts)
	}
	for _, l := range a.leaks() {
		t.Error(l)
	}
}

// faultCall is a call of the backend, the HCS function its failure names,
// and the fake's name of that function, where its fault goes (and of
// another it recovers through, where the fault goes too).
type faultCall struct {
	name, hcs, fake, also string
	// waits: the backend waits for the function's operation, so a stalled
	// operation shows.
	waits bool
	do    func(ctx context.Context, f *faultPod) error
}

var faultCalls = []faultCall{
	{"Create", "HcsCreateComputeSystem", "create", "", true, func(ctx context.Context, f *faultPod) error {
		return discardNew(f.b.Create(ctx, fmt.Sprint("other", time.Now().UnixNano()), createSettings()))
	}},
	{"Open", "HcsOpenComputeSystem", "open", "", false, func(ctx context.Context, f *faultPod) error {
		s, err := f.b.Open(ctx, "ctr")
		if err == nil {
			s.Close() // a running system's scratch stays: the error says so
		}
		return err
	}},
	{"Start", "HcsStartComputeSystem", "start", "", true, func(ctx context.Context, f *faultPod) error { return f.sys.Start(ctx) }},
	{"Shutdown", "HcsShutDownComputeSystem", "shutdown", "", false, func(ctx context.Context, f *faultPod) error { return f.sys.Shutdown(ctx) }},
	{"Terminate", "HcsTerminateComputeSystem", "terminate", "", false, func(ctx context.Context, f *faultPod) error { return f.sys.Terminate(ctx) }},
	{"Stats", "HcsGetComputeSystemProperties", "statistics", "", true, func(ctx context.Context, f *faultPod) error {
		_, err := f.sys.Stats(ctx)
		return err
	}},
	{"Modify", "HcsModifyComputeSystem", "modify", "", true, func(ctx context.Context, f *faultPod) error {
		return f.sys.Modify(ctx, compute.Resources{CPUWeight: 5})
	}},
	{"CreateProcess", "HcsCreateProcess", "createProcess", "processInfo", true, func(ctx context.Context, f *faultPod) error {
		p, err := f.sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: "probe.exe"})
		if err == nil {
			p.Close()
		}
		return err
	}},
	{"Kill", "HcsTerminateProcess", "kill", "", true, func(ctx context.Context, f *faultPod) error { return f.p.Kill(ctx) }},
	{"Kill's handle", "HcsOpenProcess", "openProcess", "", false, func(ctx context.Context, f *faultPod) error { return f.p.Kill(ctx) }},
	{"Signal", "HcsSignalProcess", "signal", "", true, func(ctx context.Context, f *faultPod) error { return f.p.Signal(ctx, compute.CtrlC) }},
	{"ResizeConsole", "HcsModifyProcess", "resize", "", true, func(ctx context.Context, f *faultPod) error {
		return f.p.ResizeConsole(ctx, 80, 25)
	}},
}

// discardNew terminates and closes a system Create made, and passes on
// Create's error.
func discardNew(s compute.System, err error) error {
	if err != nil {
		return err
	}
	s.Terminate(context.Background())
	<-s.Wait()
	return s.Close()
}

// faultClass is a fault and the errdefs class it must come back as.
type faultClass struct {
	name  string
	hr    syscall.Errno // 0: a stall
	deaf  bool
	class func(error) bool
}

var faultClasses = []faultClass{
	{"operation timeout", hrTimeout, false, errdefs.IsDeadlineExceeded},
	{"access denied", hrAccessDenied, false, errdefs.IsPermissionDenied},
	{"invalid state", hrInvalidState, false, errdefs.IsFailedPrecondition},
	{"service disconnect", hrDisconnect, false, errdefs.IsUnavailable},
	{"stall", 0, false, errdefs.IsDeadlineExceeded},
	{"stall past cancel", 0, true, errdefs.IsDeadlineExceeded},
}

// classOfCall is the class fc's failure has under fault k: runhcs reads
// a statistics query refused with access denied or invalid state as a
// system that is stopping (NotFound).
func classOfCall(c faultCall, k faultClass) func(error) bool {
	if c.name == "Stats" && (k.hr == hrAccessDenied || k.hr == hrInvalidState) {
		return errdefs.IsNotFound
	}
	return k.class
}

const (
	// faultDeadline is the deadline of a call HCS stalls: it returns at
	// the deadline.
	faultDeadline = 100 * time.Millisecond
	// answerDeadline is the deadline of a call HCS fails: it returns with
	// HCS's answer, long before, on any machine; a short one would race
	// the answer on a slow one (under Wine with a stack move at every
	// call, a create takes longer than faultDeadline).
	answerDeadline = 5 * time.Second
	// faultSlack is how late past its deadline a call may return: the
	// cancel's grace and a busy test machine.
	faultSlack = 400 * time.Millisecond
)

// deadlineOf is the deadline of a call under fault f.
func deadlineOf(f fault) time.Duration {
	if f.stall || f.deaf {
		return faultDeadline
	}
	return answerDeadline
}

// callBy runs do with a deadline and returns its error and how long it
// took; a call that does not return by the deadline and a second is an
// error of the test, and its result is nil.
func callBy(t *testing.T, deadline time.Duration, do func(ctx context.Context) error) (error, time.Duration, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	began := time.Now()
	res := make(chan error, 1)
	go func() { res <- do(ctx) }()
	select {
	case err := <-res:
		return err, time.Since(began), true
	case <-time.After(deadline + time.Second):
		t.Errorf("did not return %v past its deadline", time.Second)
		return nil, 0, false
	}
}

// Every call returns by its context's deadline, whatever HCS does, with an
// error that names the HCS function and the HRESULT, of the class the
// HRESULT means; once the fault clears, the same call succeeds; and the
// pod is then removed with nothing left.
func TestFaultCalls(t *testing.T) {
	for _, c := range faultCalls {
		for _, k := range faultClasses {
			if k.hr == 0 && !c.waits {
				continue // nothing waits for a stalled operation
			}
			t.Run(c.name+"/"+k.name, func(t *testing.T) {
				f := newFaultPod(t)
				flt := fault{stall: !k.deaf, deaf: k.deaf}
				switch {
				case k.hr != 0 && c.waits:
					flt = fault{op: k.hr}
				case k.hr != 0:
					flt = fault{call: k.hr}
				}
				clear := f.a.inject(t, c.fake, flt)
				if c.also != "" {
					defer f.a.inject(t, c.also, flt)()
				}
				deadline := deadlineOf(flt)
				err, took, returned := callBy(t, deadline, func(ctx context.Context) error { return c.do(ctx, f) })
				if returned {
					checkFaultError(t, err, took, deadline, c, k)
				}
				if k.deaf && returned && f.a.operationsLeft() == 0 {
					t.Error("an operation HCS did not end is not counted as left to HCS")
				}
				clear()
				if err, _, _ := callBy(t, 2*time.Second, func(ctx context.Context) error { return c.do(ctx, f) }); err != nil && !stoppedBy(c, err, f) {
					t.Errorf("%s once the fault cleared = %v", c.name, err)
				}
				f.remove(t)
			})
		}
	}
}

// stoppedBy reports whether err is a Terminate's or a Kill's NotFound for
// a system or process that did stop: the background terminate, or the
// kill HCS carried out late, may have stopped it first.
func stoppedBy(c faultCall, err error, f *faultPod) bool {
	var stopped <-chan struct{}
	switch {
	case !errdefs.IsNotFound(err):
		return false
	case c.name == "Terminate":
		stopped = f.sys.Wait()
	case c.fake == "kill":
		stopped = f.p.Wait()
	default:
		return false
	}
	select {
	case <-stopped:
		return true
	case <-time.After(time.Second):
		return false
	}
}

func checkFaultError(t *testing.T, err error, took, deadline time.Duration, c faultCall, k faultClass) {
	t.Helper()
	if err == nil {
		t.Fatal("no error")
	}
	if took > deadline+faultSlack {
		t.Errorf("returned %v after a deadline of %v", took, deadline)
	}
	if !strings.Contains(err.Error(), c.hcs) {
		t.Errorf("%q does not name %s", err, c.hcs)
	}
	if k.hr != 0 {
		if !errors.Is(err, k.hr) || !strings.Contains(err.Error(), fmt.Sprintf("HRESULT 0x%08X", uint32(k.hr))) {
			t.Errorf("%q does not carry HRESULT 0x%08X", err, uint32(k.hr))
		}
	}
	if class := classOfCall(c, k); !class(err) {
		t.Errorf("%q is not of its class", err)
	}
}
