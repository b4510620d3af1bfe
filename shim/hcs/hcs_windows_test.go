//go:build windows

package hcs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/Microsoft/hcsshim"
	"github.com/Microsoft/hcsshim/osversion"
	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// These tests run the Windows adapter without HCS (none of them needs
// computecore.dll), so they also run under Wine.

// TestWindowsFacts reads HCS's HRESULTs as the binding returns them, and
// the layer functions' hcsshim errors, plain and wrapped by the backend.
func TestWindowsFacts(t *testing.T) {
	var api windowsAPI
	cases := []struct {
		name  string
		err   error
		check func(errFacts) bool
		class func(error) bool
	}{
		{"system does not exist", syscall.Errno(0xC037010E), func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
		{"element not found", syscall.Errno(0x490), func(f errFacts) bool { return f.NotExist && f.AlreadyStopped }, errdefs.IsNotFound},
		{"already stopped", syscall.Errno(0xC0370110), func(f errFacts) bool { return f.AlreadyStopped }, errdefs.IsNotFound},
		{"process already stopped", syscall.Errno(0x8037011F), func(f errFacts) bool { return f.AlreadyStopped }, errdefs.IsNotFound},
		{"closed by the core", errHandleClosed, func(f errFacts) bool { return f.AlreadyClosed }, errdefs.IsFailedPrecondition},
		{"operation timeout", syscall.Errno(0x80370118), func(f errFacts) bool { return f.Timeout }, nil},
		{"invalid state", syscall.Errno(0xC0370105), func(f errFacts) bool { return f.InvalidState }, errdefs.IsFailedPrecondition},
		{"invalid JSON", syscall.Errno(0xC037010D), func(f errFacts) bool { return f.NotSupported }, errdefs.IsNotImplemented},
		{"service disconnected", errServiceGone, func(f errFacts) bool { return f.Unavailable }, errdefs.IsUnavailable},
		{"layer not ready", &hcsshim.HcsError{Err: syscall.Errno(21)}, func(f errFacts) bool { return f.LayerNotReady }, nil},
		{"access denied activating a layer", &hcsshim.HcsError{Err: syscall.Errno(5)}, func(f errFacts) bool { return f.AccessDenied }, errdefs.IsPermissionDenied},
		{"already exists", syscall.Errno(0x8037010F), func(f errFacts) bool { return f.AlreadyExists }, errdefs.IsAlreadyExists},
		{"no computecore.dll", syscall.Errno(126), func(f errFacts) bool { return f.ServiceMissing }, nil},
		{"with HCS's detail", withResult(syscall.Errno(0xC037010E), `{"ErrorMessage":"gone"}`), func(f errFacts) bool { return f.NotExist }, errdefs.IsNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, err := range []error{tc.err, fmt.Errorf("backend context: %w", tc.err)} {
				f := api.facts(err)
				if !tc.check(f) {
					t.Errorf("facts(%v) = %+v", err, f)
				}
				if tc.class != nil && !tc.class(classify("op", err, f)) {
					t.Errorf("classify(%v) is not of the expected class", err)
				}
			}
		})
	}
	if f := api.facts(nil); f != (errFacts{}) {
		t.Errorf("facts(nil) = %+v", f)
	}
}

// The one HCS_EVENT_CALLBACK, called as HCS calls it (a stdcall function
// of an HCS_EVENT pointer and the context), hands the event to the
// listener of its key with the event data decoded; a key without a
// listener drops it.
func TestEventCallback(t *testing.T) {
	got := make(chan string, 1)
	key := hcsEvents.add(func(typ eventType, data string) { got <- fmt.Sprintf("%#x %s", uint32(typ), data) })
	data, err := windows.UTF16PtrFromString(`{"ExitCode":3,"Exited":true}`)
	if err != nil {
		t.Fatal(err)
	}
	ev := hcsEvent{Type: uint32(eventProcessExited), EventData: data}
	syscall.SyscallN(eventCallback, uintptr(unsafe.Pointer(&ev)), key)
	if s := <-got; s != `0x10000 {"ExitCode":3,"Exited":true}` {
		t.Errorf("listener got %q", s)
	}
	hcsEvents.remove(key)
	syscall.SyscallN(eventCallback, uintptr(unsafe.Pointer(&ev)), key)
	syscall.SyscallN(eventCallback, 0, key)
	select {
	case s := <-got:
		t.Errorf("a removed listener got %q", s)
	default:
	}
}

// HRESULTs are errors when negative.
func TestBindingConversions(t *testing.T) {
	if err := hresult(0); err != nil {
		t.Errorf("S_OK = %v", err)
	}
	if err := hresult(1); err != nil {
		t.Errorf("S_FALSE = %v", err)
	}
	if err := hresult(uintptr(0xC037010E)); err != syscall.Errno(0xC037010E) {
		t.Errorf("HCS_E_SYSTEM_NOT_FOUND = %v", err)
	}
	if s := takeString(nil); s != "" {
		t.Errorf("takeString(nil) = %q", s)
	}
}

// The real backend counts the processors of every group with
// GetActiveProcessorCount(ALL_PROCESSOR_GROUPS), which Wine answers too.
func TestHostCPUsAllGroups(t *testing.T) {
	b, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := int(windows.GetActiveProcessorCount(windows.ALL_PROCESSOR_GROUPS))
	if got := b.HostCPUs(); got < 1 || got != want {
		t.Errorf("HostCPUs = %d, want GetActiveProcessorCount(ALL_PROCESSOR_GROUPS) = %d", got, want)
	}
}

// A host without the compute service (Wine, or Windows without the
// Containers feature) has no computecore.dll: the binding's calls fail
// with ERROR_MOD_NOT_FOUND. The backend says how to install the service,
// and Open, which the shim's delete uses, finds no system to clean up.
func TestNoComputeService(t *testing.T) {
	if windows.NewLazySystemDLL("computecore.dll").Load() == nil {
		t.Skip("this host has the compute service")
	}
	b, err := New(Options{StateDir: winetest.TempDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err = b.Open(ctx, "x")
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Open = %v, want NotFound with the fix", err)
	}
	_, err = b.Create(ctx, "x", &compute.Settings{Layers: compute.Layers{Scratch: `C:\s\x`, Parents: []string{`C:\l\base`}}})
	if osversion.Build() < osversion.RS5 {
		if !errdefs.IsNotImplemented(err) {
			t.Errorf("Create on build %d = %v, want NotImplemented", osversion.Build(), err)
		}
		return
	}
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), serviceMissingFix) {
		t.Errorf("Create = %v, want Unavailable with the fix", err)
	}
}

// TestComputecoreBinding runs the binding and the core against a stand-in
// of computecore.dll (testdata/fakecomputecore, built by
// TestComputecoreBindingUnderWine, which runs this under Wine): every
// function called with HCS's signatures, documents through UTF-16 both
// ways, results freed with LocalFree, notifications on the stand-in's own
// threads, HCS_PROCESS_INFORMATION's pipe handles read through go-winio.
func TestComputecoreBinding(t *testing.T) {
	path := os.Getenv("WINPROC_FAKE_COMPUTECORE")
	if path == "" {
		t.Skip("WINPROC_FAKE_COMPUTECORE is not set: TestComputecoreBindingUnderWine runs this")
	}
	b := newComputecoreBinding(windows.NewLazyDLL(path))
	c := &computeCore{api: b}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Create: the document arrives whole (the stand-in echoes it in the
	// properties), non-ASCII included.
	doc := &schema2.ComputeSystem{Owner: Owner, SchemaVersion: &schema2.V21, Container: &schema2.Container{GuestOs: &schema2.GuestOs{HostName: "hôte-ünïcode"}}}
	sys, err := c.createContainer(ctx, "c1", doc)
	if err != nil {
		t.Fatal(err)
	}
	cs := sys.(*coreSystem)
	raw, err := c.runOn(ctx, &cs.coreHandle, "HcsGetComputeSystemProperties", func(h, op hcsHandle) error {
		return b.getComputeSystemProperties(h, op, `{"PropertyTypes":["Statistics"]}`)
	})
	if err != nil {
		t.Fatal(err)
	}
	var echo struct {
		Id    string
		Echo  json.RawMessage
		Query json.RawMessage
	}
	if err := json.Unmarshal([]byte(raw), &echo); err != nil {
		t.Fatalf("properties %q: %v", raw, err)
	}
	sent, _ := json.Marshal(doc)
	if echo.Id != "c1" || string(echo.Echo) != string(sent) || string(echo.Query) != `{"PropertyTypes":["Statistics"]}` {
		t.Errorf("the stand-in got id %q, document %s, query %s; sent %s", echo.Id, echo.Echo, echo.Query, sent)
	}
	if err := sys.Start(ctx); err != nil {
		t.Fatal(err)
	}
	props, err := sys.Properties(ctx, schema2.PropertyStatistics)
	if err != nil || props.Statistics == nil || props.Statistics.Processor.TotalRuntime100ns != 7 || props.Statistics.Memory.MemoryUsageCommitBytes != 4096 {
		t.Errorf("statistics %+v, %v", props, err)
	}
	req := &schema2.ModifySettingRequest{ResourcePath: schema2.ResourceMemoryLimit, RequestType: schema2.RequestUpdate, Settings: 512}
	if err := sys.Modify(ctx, req); err != nil {
		t.Errorf("Modify: %v", err)
	}

	// A process: its stdout through the pipe HCS handed over, its exit
	// code by notification from another thread.
	p, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "app.exe", CreateStdOutPipe: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() != 4242 {
		t.Errorf("Pid = %d", p.Pid())
	}
	_, stdout, _, err := p.Stdio()
	if err != nil || stdout == nil {
		t.Fatalf("Stdio: %v, %v", stdout, err)
	}
	out, err := io.ReadAll(stdout)
	stdout.Close()
	if err != nil || string(out) != "hello from the fake\r\n" {
		t.Errorf("stdout %q, %v", out, err)
	}
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.ExitCode(); code != 3 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}

	// A crash's exit status arrives unsigned.
	crash, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "crash.exe"})
	if err != nil {
		t.Fatal(err)
	}
	if err := crash.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, err := crash.ExitCode(); code != 0xC000013A || err != nil {
		t.Errorf("crash ExitCode = %d, %v; want %d", code, err, 0xC000013A)
	}
	crash.Close()

	// A console event the process holds, then a kill: the kill goes
	// through handles of its own (HcsOpenComputeSystem, HcsOpenProcess),
	// not behind the held event, and the process ends.
	c.signalWait = 100 * time.Millisecond
	hang, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "hang.exe"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hang.Signal(ctx, "CtrlShutdown"); err != nil {
		t.Fatalf("Signal = %v", err)
	}
	if err := hang.Kill(ctx); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	waited := make(chan error, 1)
	go func() { waited <- hang.Wait() }()
	select {
	case err := <-waited:
		if code, cerr := hang.ExitCode(); err != nil || code != 1 || cerr != nil {
			t.Errorf("after the kill: Wait %v, ExitCode %d, %v", err, code, cerr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the kill was queued behind the held console event")
	}
	hang.Close()

	// A create whose wait fails spuriously: HcsGetProcessInfo hands over
	// the process and its stdout.
	sp, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "spurious.exe", CreateStdOutPipe: true})
	if err != nil {
		t.Fatalf("CreateProcess after a spurious wait failure = %v", err)
	}
	if sp.Pid() != 4245 {
		t.Errorf("Pid = %d, want 4245", sp.Pid())
	}
	if _, stdout, _, err := sp.Stdio(); err != nil || stdout == nil {
		t.Errorf("Stdio after HcsGetProcessInfo: %v, %v", stdout, err)
	} else {
		out, err := io.ReadAll(stdout)
		stdout.Close()
		if err != nil || string(out) != "hello from the fake\r\n" {
			t.Errorf("stdout %q, %v", out, err)
		}
	}
	if err := sp.Wait(); err != nil {
		t.Fatal(err)
	}
	sp.Close()

	// Errors: HCS's detail joins the HRESULT; a missing system is
	// NotExist.
	if _, err := c.createContainer(ctx, "exists", doc); !errors.Is(err, syscall.Errno(0x8037010F)) || !strings.Contains(err.Error(), "fake: a compute system exists") {
		t.Errorf("create of an existing system = %v", err)
	}
	if _, err := c.openContainer(ctx, "missing"); !coreFacts(err).NotExist {
		t.Errorf("open of a missing system = %v", err)
	}
	if st, err := c.addCredentialGuard("c1", "{}"); err != nil || st.Cookie != "ZmFrZQ==" {
		t.Errorf("addCredentialGuard = %+v, %v", st, err)
	}

	// Terminate: the exit comes by notification.
	if err := sys.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sys.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
	if err := sys.Close(); err != nil {
		t.Error(err)
	}
}

// TestComputecoreEnumerate lists systems through the binding against the
// stand-in (TestComputecoreBindingUnderWine runs this under Wine): the
// systems of winproc only, as the query reaches the stand-in and the list
// comes back as the operation's result.
func TestComputecoreEnumerate(t *testing.T) {
	path := os.Getenv("WINPROC_FAKE_COMPUTECORE")
	if path == "" {
		t.Skip("WINPROC_FAKE_COMPUTECORE is not set: TestComputecoreBindingUnderWine runs this")
	}
	b := newComputecoreBinding(windows.NewLazyDLL(path))
	c := &computeCore{api: b}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.listSystems(ctx, Owner)
	if err != nil || len(list) != 1 || list[0] != (systemSummary{Id: "c1", Owner: Owner, State: "Running", SystemType: "Container"}) {
		t.Errorf("listSystems = %+v, %v", list, err)
	}
	var others string
	if err := c.runWith(ctx, "HcsEnumerateComputeSystems", func(op hcsHandle) error {
		return b.enumerateComputeSystems(`{"Owners":["docker"]}`, op)
	}, c.resultInto(&others), nil); err != nil || !strings.Contains(others, `"foreign"`) || strings.Contains(others, `"c1"`) {
		t.Errorf("the systems of another owner: %s, %v", others, err)
	}
}
