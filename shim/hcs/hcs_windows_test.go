//go:build windows

package hcs

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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

// TestComputecoreBinding runs the binding and the core against the node's
// stand-in HCS (integration/winenode/testdata/standins: computecore.dll
// and its service, real processes in a job object; built and run under
// Wine by TestComputecoreBindingUnderWine): every function called with
// HCS's signatures, documents through UTF-16 both ways, results freed with
// LocalFree, notifications on the stand-in's own threads,
// HCS_PROCESS_INFORMATION's pipe handles read through go-winio.
func TestComputecoreBinding(t *testing.T) {
	s := loadStandin(t)
	c := s.c
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Create: the document arrives whole (the service keeps what it got),
	// non-ASCII included.
	doc := s.document(t, Owner)
	doc.Container.GuestOs = &schema2.GuestOs{HostName: "hôte-ünïcode"}
	sys := s.create(t, "binding", doc)
	if sent, _ := json.Marshal(doc); keptDocument(t, "binding") != string(sent) {
		t.Errorf("the stand-in got %s; sent %s", keptDocument(t, "binding"), sent)
	}
	if err := sys.Start(ctx); err != nil {
		t.Fatal(err)
	}
	props, err := sys.Properties(ctx, schema2.PropertyStatistics)
	if err != nil || props.Statistics == nil || props.Statistics.Timestamp.IsZero() || props.Statistics.Uptime100ns == 0 {
		t.Errorf("statistics %+v, %v", props, err)
	}
	if _, err := sys.Properties(ctx, "Memory"); !errors.Is(err, syscall.Errno(0x80070032)) || !strings.Contains(err.Error(), "HcsGetComputeSystemProperties") {
		t.Errorf("a property type HCS refuses: %v; want ERROR_NOT_SUPPORTED naming the call", err)
	}
	req := &schema2.ModifySettingRequest{ResourcePath: schema2.ResourceMemoryLimit, RequestType: schema2.RequestUpdate, Settings: 512}
	if err := sys.Modify(ctx, req); err != nil {
		t.Errorf("Modify: %v", err)
	} else if sent, _ := json.Marshal(req); keptDocument(t, "binding-modify-1") != string(sent) {
		t.Errorf("the stand-in got the modification %s; sent %s", keptDocument(t, "binding-modify-1"), sent)
	}

	// A process: its stdout through the pipe HCS handed over, its exit
	// code by notification from another thread.
	p, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "cmd.exe /c echo hello from the container& exit 3", CreateStdOutPipe: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() == 0 {
		t.Error("Pid = 0")
	}
	readStdout(t, p, "hello from the container")
	if err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	if code, err := p.ExitCode(); code != 3 || err != nil {
		t.Errorf("ExitCode = %d, %v", code, err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}

	// A crash's exit status (STATUS_CONTROL_C_EXIT) arrives unsigned.
	crash, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "cmd.exe /c exit -1073741510"})
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

	t.Run("a kill behind a held console event", func(t *testing.T) { killBehindHeldSignal(t, c, sys) })
	t.Run("a create whose wait fails spuriously", func(t *testing.T) { spuriousCreate(t, sys) })

	// Errors: HCS's detail joins the HRESULT; a missing system is
	// NotExist.
	if _, err := c.createContainer(ctx, "binding", doc); !errors.Is(err, syscall.Errno(0x8037010F)) || !strings.Contains(err.Error(), "A compute system with this id exists") {
		t.Errorf("create of an existing system = %v", err)
	}
	if _, err := c.openContainer(ctx, "missing"); !coreFacts(err).NotExist {
		t.Errorf("open of a missing system = %v", err)
	}
	// The stand-in keeps no Container Credential Guard instance: its
	// service properties, which the binding reads back, list none.
	if _, err := c.addCredentialGuard("binding", "{}"); err == nil || !strings.Contains(err.Error(), `HCS answered "{\"Properties\":[]}"`) {
		t.Errorf("addCredentialGuard = %v; want the stand-in's empty service properties", err)
	}

	// Terminate: the exit comes by notification.
	if err := sys.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sys.Wait(); err != nil {
		t.Errorf("Wait = %v", err)
	}
}

// readStdout reads the process's stdout to its end and checks it.
func readStdout(t *testing.T, p hcsProcess, want string) {
	t.Helper()
	_, stdout, _, err := p.Stdio()
	if err != nil || stdout == nil {
		t.Fatalf("Stdio: %v, %v", stdout, err)
	}
	out, err := io.ReadAll(stdout)
	stdout.Close()
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("stdout %q, %v; want %q", out, err, want)
	}
}

// killBehindHeldSignal: a console event the process holds (faults.h's
// hold), then a kill: the kill goes through handles of its own
// (HcsOpenComputeSystem, HcsOpenProcess), not behind the held event, and
// the process ends.
func killBehindHeldSignal(t *testing.T, c *computeCore, sys *coreSystem) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writeFaults(t, "HcsSignalProcess hold 0 1\n")
	c.signalWait = 100 * time.Millisecond
	hang, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "winproc-testapp.exe sleep -seconds 0 -ignore-events", CreateStdOutPipe: true})
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Close()
	// The event once the program takes events: before, Windows' default
	// handler would end it.
	_, stdout, _, err := hang.Stdio()
	if err != nil || stdout == nil {
		t.Fatalf("Stdio: %v, %v", stdout, err)
	}
	defer stdout.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("the program said %q, %v; want ready", line, err)
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
}

// spuriousCreate: a create whose wait fails (faults.h's spurious,
// E_INVALIDARG) although the process was made: HcsGetProcessInfo hands
// over the process and its stdout.
func spuriousCreate(t *testing.T, sys *coreSystem) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	writeFaults(t, "HcsCreateProcess spurious 80070057 1\n")
	sp, err := sys.CreateProcess(ctx, &schema2.ProcessParameters{CommandLine: "cmd.exe /c echo made anyway", CreateStdOutPipe: true})
	if err != nil {
		t.Fatalf("CreateProcess after a spurious wait failure = %v", err)
	}
	defer sp.Close()
	if sp.Pid() == 0 {
		t.Error("Pid = 0 after HcsGetProcessInfo")
	}
	readStdout(t, sp, "made anyway")
	if err := sp.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestComputecoreEnumerate lists systems through the binding against the
// node's stand-in HCS (TestComputecoreBindingUnderWine runs this under
// Wine): the systems of winproc only, as the query reaches the service
// and the list comes back as the operation's result.
func TestComputecoreEnumerate(t *testing.T) {
	s := loadStandin(t)
	c := s.c
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ours := s.create(t, "enum-ours", s.document(t, Owner))
	if err := ours.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s.create(t, "enum-foreign", s.document(t, "docker"))
	list, err := c.listSystems(ctx, Owner)
	if err != nil || !slices.Contains(list, systemSummary{Id: "enum-ours", Owner: Owner, State: "Running", SystemType: "Container"}) {
		t.Errorf("listSystems = %+v, %v; want enum-ours running", list, err)
	}
	for _, sum := range list {
		if sum.Owner != Owner {
			t.Errorf("listSystems lists %+v, of another owner", sum)
		}
	}
	var others string
	if err := c.runWith(ctx, "HcsEnumerateComputeSystems", func(op hcsHandle) error {
		return s.b.enumerateComputeSystems(`{"Owners":["docker"]}`, op)
	}, c.resultInto(&others), nil); err != nil || !strings.Contains(others, `"enum-foreign"`) || strings.Contains(others, `"enum-ours"`) {
		t.Errorf("the systems of another owner: %s, %v", others, err)
	}
}
