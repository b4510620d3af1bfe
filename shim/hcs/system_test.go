package hcs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// created returns a created system and its fake.
func created(t *testing.T) (*Backend, *fakeAPI, compute.System, *fakeSystem) {
	t.Helper()
	b, a := testBackend(t)
	sys, err := b.Create(context.Background(), "ctr", createSettings())
	if err != nil {
		t.Fatal(err)
	}
	return b, a, sys, a.existing["ctr"]
}

func TestSystemLifecycle(t *testing.T) {
	b, a, sys, _ := created(t)
	ctx := context.Background()
	if err := sys.Start(ctx); err != nil {
		t.Fatal(err)
	}
	notWithin(t, sys.Wait(), 20*time.Millisecond, "Wait before any stop")
	if err := sys.ExitError(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitError before the stop = %v", err)
	}
	// hcsshim answers an accepted Shutdown with a pending error.
	if err := sys.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	within(t, sys.Wait(), "stop after Shutdown")
	if err := sys.ExitError(); err != nil {
		t.Errorf("ExitError after a requested shutdown = %v", err)
	}
	// A stopped system is gone for everything but Wait, ExitError, Close.
	for name, call := range map[string]func() error{
		"Start":     func() error { return sys.Start(ctx) },
		"Shutdown":  func() error { return sys.Shutdown(ctx) },
		"Terminate": func() error { return sys.Terminate(ctx) },
		"Stats":     func() error { _, err := sys.Stats(ctx); return err },
		"Pids":      func() error { _, err := sys.ProcessList(ctx); return err },
		"Modify":    func() error { return sys.Modify(ctx, compute.Resources{}) },
		"Create":    func() error { _, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: "x"}); return err },
	} {
		if err := call(); !errdefs.IsNotFound(err) {
			t.Errorf("%s after the stop = %v, want NotFound", name, err)
		}
	}
	before := len(a.layerCalls())
	if err := sys.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if got, want := a.layerCalls()[before:], []string{"unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Close layer calls %q, want %q", got, want)
	}
	if rec, _ := b.records.read("ctr"); rec != nil {
		t.Errorf("record left after Close: %+v", rec)
	}
	if err := sys.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if n := len(a.layerCalls()); n != before+2 {
		t.Errorf("second Close touched layers again")
	}
	if err := sys.Start(ctx); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Start after Close = %v", err)
	}
}

func TestSystemTerminate(t *testing.T) {
	_, a, sys, _ := created(t)
	if err := sys.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, sys.Wait(), "stop after Terminate")
	if err := sys.ExitError(); err != nil {
		t.Errorf("ExitError = %v", err)
	}
	if calls := a.callList(); calls[len(calls)-1] != "terminate ctr" {
		t.Errorf("calls %q", calls)
	}
}

func TestSystemShutdownDoesNotWait(t *testing.T) {
	_, _, sys, fc := created(t)
	fc.stopOnShutdown = false // HCS accepted it; the stop comes later
	if err := sys.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	notWithin(t, sys.Wait(), 20*time.Millisecond, "stop")
	fc.stop(nil)
	within(t, sys.Wait(), "stop")
	if err := sys.ExitError(); err != nil {
		t.Errorf("ExitError = %v", err)
	}
}

func TestSystemUnexpectedStop(t *testing.T) {
	_, _, sys, fc := created(t)
	unexpected := syscall.Errno(0xC0370106)
	fc.stop(unexpected)
	within(t, sys.Wait(), "stop")
	if err := sys.ExitError(); !errors.Is(err, unexpected) {
		t.Errorf("ExitError = %v", err)
	}
}

func TestSystemStopErrors(t *testing.T) {
	cases := []struct {
		name  string
		err   error
		class func(error) bool
	}{
		{"already stopped", syscall.Errno(0xC0370110), errdefs.IsNotFound},
		{"gone", syscall.Errno(0xC037010E), errdefs.IsNotFound},
		{"invalid state", syscall.Errno(0xC0370105), errdefs.IsFailedPrecondition},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, a, sys, fc := created(t)
			a.failNext("shutdown", tc.err)
			if err := sys.Shutdown(context.Background()); !tc.class(err) {
				t.Errorf("Shutdown = %v", err)
			}
			// A refused shutdown is not a requested stop.
			fc.stop(syscall.Errno(0xC0370106))
			within(t, sys.Wait(), "stop")
			if sys.ExitError() == nil {
				t.Error("an unexpected stop after a refused shutdown has no ExitError")
			}
		})
	}
}

func TestSystemStartError(t *testing.T) {
	_, a, sys, _ := created(t)
	a.failNext("start", syscall.Errno(0x80370101))
	if err := sys.Start(context.Background()); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Start = %v", err)
	}
}

func TestSystemCloseBeforeStop(t *testing.T) {
	b, a, sys, _ := created(t)
	before := len(a.layerCalls())
	err := sys.Close()
	if !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Close of a running system = %v, want FailedPrecondition about its scratch", err)
	}
	if n := len(a.layerCalls()); n != before {
		t.Errorf("Close of a running system touched its layers")
	}
	within(t, sys.Wait(), "Wait after Close")
	if err := sys.ExitError(); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("ExitError = %v", err)
	}
	if rec, _ := b.records.read("ctr"); rec == nil {
		t.Fatal("the record of a scratch still mounted was removed")
	}

	// A later delete opens the system again; once it has stopped, Close
	// releases the scratch from the record.
	opened, err := b.Open(context.Background(), "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if err := opened.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, opened.Wait(), "stop of the opened system")
	if err := opened.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := a.layerCalls()[before:], []string{"unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}
	if rec, _ := b.records.read("ctr"); rec != nil {
		t.Error("record left")
	}
}

func TestSystemCloseKeepsRecordWhenDeactivateFails(t *testing.T) {
	b, a, sys, _ := created(t)
	sys.Terminate(context.Background())
	within(t, sys.Wait(), "stop")
	a.failNext("deactivate", errors.New("deactivate failed"))
	if err := sys.Close(); err == nil {
		t.Fatal("Close hid the failed deactivation")
	}
	if rec, _ := b.records.read("ctr"); rec == nil {
		t.Error("the record of a scratch still active was removed")
	}
}

func TestSystemCloseReportsUnprepareButReleases(t *testing.T) {
	b, a, sys, _ := created(t)
	sys.Terminate(context.Background())
	within(t, sys.Wait(), "stop")
	a.failNext("unprepare", errors.New("unprepare failed"))
	if err := sys.Close(); err == nil {
		t.Fatal("Close hid the failed unprepare")
	}
	if rec, _ := b.records.read("ctr"); rec != nil {
		t.Error("record kept although the scratch was deactivated")
	}
}

func TestOpen(t *testing.T) {
	b, a, sys, _ := created(t)
	opened, err := b.Open(context.Background(), "ctr")
	if err != nil {
		t.Fatal(err)
	}
	if opened.ID() != "ctr" {
		t.Errorf("ID = %q", opened.ID())
	}
	// Both handles see the stop.
	if err := opened.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, opened.Wait(), "stop seen by the opened handle")
	within(t, sys.Wait(), "stop seen by the creating handle")
	_ = a
}

func TestOpenWithoutRecord(t *testing.T) {
	b, a := testBackend(t)
	a.existing["x"] = newFakeSystem(a.hcs, "x")
	sys, err := b.Open(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	sys.Terminate(context.Background())
	within(t, sys.Wait(), "stop")
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	if calls := a.layerCalls(); len(calls) != 0 {
		t.Errorf("layer calls without a record: %q", calls)
	}
}

func TestOpenMissing(t *testing.T) {
	b, a := testBackend(t)
	if _, err := b.Open(context.Background(), "gone"); !errdefs.IsNotFound(err) {
		t.Fatalf("Open = %v", err)
	}
	if calls := a.layerCalls(); len(calls) != 0 {
		t.Errorf("layer calls %q", calls)
	}

	// A system that died with its shim: its recorded scratch is released.
	if err := b.records.write(record{ID: "dead", Scratch: `C:\s\dead`}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(context.Background(), "dead"); !errdefs.IsNotFound(err) {
		t.Fatalf("Open = %v", err)
	}
	if got, want := a.layerCalls(), []string{"unprepare", "deactivate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("layer calls %q, want %q", got, want)
	}
	if rec, _ := b.records.read("dead"); rec != nil {
		t.Error("record left")
	}
	if _, err := b.Open(context.Background(), "../x"); !errdefs.IsInvalidArgument(err) {
		t.Errorf("Open of a bad id = %v", err)
	}
}

// On a host without the compute service (computecore.dll missing, as under
// Wine) no system can be left: Open is NotFound, so the shim's delete
// cleans up the rest instead of failing.
func TestOpenWithoutComputeService(t *testing.T) {
	b, a := testBackend(t)
	a.failNext("open", fmt.Errorf("hcs::OpenComputeSystem x: %w", syscall.Errno(126)))
	_, err := b.Open(context.Background(), "x")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "Host Compute Service is not installed") {
		t.Fatalf("Open = %v", err)
	}
}

func TestStats(t *testing.T) {
	_, a, sys, fc := created(t)
	fc.stats = schema2.Statistics{Uptime100ns: 10, Processor: &schema2.ProcessorStats{TotalRuntime100ns: 3}, Memory: &schema2.MemoryStats{MemoryUsageCommitBytes: 9}}
	st, err := sys.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Uptime != 1000 || st.CPU.TotalRuntimeNS != 300 || st.Memory.CommitBytes != 9 || st.Timestamp.IsZero() {
		t.Errorf("Stats = %+v", st)
	}
	for _, tc := range []struct {
		err   error
		class func(error) bool
	}{
		{syscall.Errno(0xC0370105), errdefs.IsNotFound}, // stopping: invalid state
		{syscall.Errno(5), errdefs.IsNotFound},          // stopping on RS1/RS2: access denied
		{syscall.Errno(6), errdefs.IsNotFound},          // stopping: invalid handle
		{syscall.Errno(0xC037010E), errdefs.IsNotFound},
		{syscall.Errno(0x8037011E), errdefs.IsUnavailable},
	} {
		a.failNext("statistics", tc.err)
		if _, err := sys.Stats(context.Background()); !tc.class(err) || !errors.Is(err, tc.err) {
			t.Errorf("Stats with %#x = %v", uint32(tc.err.(syscall.Errno)), err)
		}
		a.failOperation("statistics", tc.err)
		if _, err := sys.Stats(context.Background()); !tc.class(err) || !errors.Is(err, tc.err) {
			t.Errorf("Stats with %#x from the operation = %v", uint32(tc.err.(syscall.Errno)), err)
		}
		a.failNext("processList", tc.err)
		if _, err := sys.ProcessList(context.Background()); !tc.class(err) {
			t.Errorf("ProcessList with %#x = %v", uint32(tc.err.(syscall.Errno)), err)
		}
	}
}

func TestProcessList(t *testing.T) {
	_, _, sys, fc := created(t)
	fc.list = []schema2.ProcessDetails{{ProcessId: 4, ImageName: "System"}, {ProcessId: 1200, ImageName: "cmd.exe", UserTime100ns: 5}}
	list, err := sys.ProcessList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1].Pid != 1200 || list[1].ImageName != "cmd.exe" || list[1].UserTime != 500 {
		t.Errorf("ProcessList = %+v", list)
	}
}

// Modify sends runhcs's requests: memory in even MiB, the processor
// limits, and the affinity to the silo's job object.
func TestModify(t *testing.T) {
	_, a, sys, fc := created(t)
	ctx := context.Background()
	if err := sys.Modify(ctx, compute.Resources{}); err != nil {
		t.Errorf("an empty Modify = %v", err)
	}
	for _, tc := range []struct {
		name string
		r    compute.Resources
		want []string
		call string
	}{
		{"count", compute.Resources{CPUCount: 1}, []string{`{"ResourcePath":"Container/Processor","RequestType":"Update","Settings":{"Count":1}}`}, ""},
		{"maximum", compute.Resources{CPUMaximum: 5000}, []string{`{"ResourcePath":"Container/Processor","RequestType":"Update","Settings":{"Maximum":5000}}`}, ""},
		{"weight", compute.Resources{CPUWeight: 10}, []string{`{"ResourcePath":"Container/Processor","RequestType":"Update","Settings":{"Weight":10}}`}, ""},
		{"memory", compute.Resources{MemoryLimitBytes: 1 << 30}, []string{`{"ResourcePath":"Container/Memory/SizeInMB","RequestType":"Update","Settings":1024}`}, ""},
		{"odd memory", compute.Resources{MemoryLimitBytes: 101 << 20}, []string{`{"ResourcePath":"Container/Memory/SizeInMB","RequestType":"Update","Settings":102}`}, ""},
		{"affinity", compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 6}}}, nil, "affinity ctr 0:0x6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc.mu.Lock()
			fc.modifies = nil
			fc.mu.Unlock()
			if err := sys.Modify(ctx, tc.r); err != nil {
				t.Fatal(err)
			}
			fc.mu.Lock()
			got := fc.modifies
			fc.mu.Unlock()
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("modify documents %q, want %q", got, tc.want)
			}
			if calls := a.callList(); tc.call != "" && calls[len(calls)-1] != tc.call {
				t.Errorf("last call %q, want %q", calls[len(calls)-1], tc.call)
			}
		})
	}
	for name, r := range map[string]compute.Resources{
		"iops":      {StorageIOPSMaximum: 1},
		"bandwidth": {StorageBandwidthMaximum: 1},
	} {
		if err := sys.Modify(ctx, r); !errors.Is(err, compute.ErrNotSupported) {
			t.Errorf("Modify %s = %v, want ErrNotSupported", name, err)
		}
	}
	a.failOperation("modify", syscall.Errno(0xC0370105))
	if err := sys.Modify(ctx, compute.Resources{CPUWeight: 5}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("a refused Modify = %v", err)
	}
	// A limit the host refuses for a running container is
	// FailedPrecondition naming it, not Unimplemented (which containerd
	// takes for an older task API) nor Unknown.
	for _, tc := range []struct {
		name, call string
		r          compute.Resources
		fail       func(string, ...error)
		err        syscall.Errno
		say        string
	}{
		{"E_INVALIDARG for the processor limits", "modify", compute.Resources{CPUCount: 2}, a.failOperation, 0x80070057, "Container/Processor"},
		{"E_INVALIDARG for the memory limit", "modify", compute.Resources{MemoryLimitBytes: 1 << 30}, a.failOperation, 0x80070057, "Container/Memory/SizeInMB"},
		{"a job object without group affinity", "affinity", compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 1}}}, a.failNext, 87, "the processor affinity"},
	} {
		tc.fail(tc.call, tc.err)
		err := sys.Modify(ctx, tc.r)
		if !errdefs.IsFailedPrecondition(err) || errdefs.IsNotImplemented(err) || err == nil || !strings.Contains(err.Error(), tc.say) {
			t.Errorf("%s: Modify = %v; want FailedPrecondition naming %q", tc.name, err, tc.say)
		}
	}
}
