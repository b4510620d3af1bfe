//go:build windows

package hcscontract

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
)

// echoEnv makes this binary a container process that copies its stdin to
// its stdout.
const echoEnv = "WINPROC_HCS_CONTRACT_ECHO"

// holdEnv makes this binary a container process that takes console
// events, says "ready" once it does, and runs on until it is terminated.
const holdEnv = "WINPROC_HCS_CONTRACT_HOLD"

// reportEnv makes this binary a container process that prints its
// COMPUTERNAME and the content of the file its last argument names.
const reportEnv = "WINPROC_HCS_CONTRACT_REPORT"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) != "" {
		io.Copy(os.Stdout, os.Stdin)
		os.Exit(0)
	}
	if os.Getenv(holdEnv) != "" {
		signal.Notify(make(chan os.Signal, 1), os.Interrupt, syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(2 * time.Minute)
		os.Exit(0)
	}
	if os.Getenv(reportEnv) != "" {
		b, err := os.ReadFile(os.Args[len(os.Args)-1])
		fmt.Printf("COMPUTERNAME=%s\nfile=%s %v\n", os.Getenv("COMPUTERNAME"), b, err)
		os.Exit(0)
	}
	if spec := os.Getenv(HelperEnv); spec != "" {
		os.Exit(helper(spec))
	}
	os.Exit(m.Run())
}

func helper(spec string) int {
	parts := strings.SplitN(spec+"|contract", "|", 5)
	h := &hcs{windows.NewLazyDLL(os.Getenv(StandinEnv))}
	var sys uintptr
	for _, step := range []func(op uintptr) error{
		func(op uintptr) error {
			return h.call("HcsCreateComputeSystem", uintptr(unsafe.Pointer(u16(parts[0]))), uintptr(unsafe.Pointer(u16(Document(parts[3], parts[1], parts[2] == "terminate")))), op, 0, uintptr(unsafe.Pointer(&sys)))
		},
		func(op uintptr) error { return h.call("HcsStartComputeSystem", sys, op, 0) },
	} {
		r, _, _ := h.dll.NewProc("HcsCreateOperation").Call(0, 0)
		if err := step(r); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if _, err := h.wait(r, 20000); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0 // the handle is left for the process's exit to close
}

// otherClient runs this binary as a second HCS client that creates the
// system id and exits.
func otherClient(t *testing.T, id, vol, mode string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), HelperEnv+"="+id+"|"+vol+"|"+mode)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the second client: %v\n%s", err, out)
	}
}

func states(t *testing.T, doc string) map[string]string {
	t.Helper()
	var list []struct{ Id, State string }
	if err := json.Unmarshal([]byte(doc), &list); err != nil {
		t.Fatalf("the enumeration %q: %v", doc, err)
	}
	m := map[string]string{}
	for _, s := range list {
		m[s.Id] = s.State
	}
	return m
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within 10 s: %s", what)
}

// events records the notifications of each callback context.
var events = struct {
	sync.Mutex
	got  map[uintptr][]uint32
	data map[uintptr][]string
}{got: map[uintptr][]uint32{}, data: map[uintptr][]string{}}

type hcsEvent struct {
	Type      uint32
	EventData *uint16
	Operation uintptr
}

var eventCallback = windows.NewCallback(func(e *hcsEvent, ctx uintptr) uintptr {
	events.Lock()
	events.got[ctx] = append(events.got[ctx], e.Type)
	events.data[ctx] = append(events.data[ctx], windows.UTF16PtrToString(e.EventData))
	events.Unlock()
	return 0
})

// eventDataOf is the data of each notification of ctx.
func eventDataOf(ctx uintptr) []string {
	events.Lock()
	defer events.Unlock()
	return append([]string(nil), events.data[ctx]...)
}

func eventsOf(ctx uintptr) []uint32 {
	events.Lock()
	defer events.Unlock()
	return append([]uint32(nil), events.got[ctx]...)
}

var opDone = struct {
	sync.Mutex
	got map[uintptr]int
}{got: map[uintptr]int{}}

var opCallback = windows.NewCallback(func(op, ctx uintptr) uintptr {
	opDone.Lock()
	opDone.got[ctx]++
	opDone.Unlock()
	return 0
})

// writeFaults sets the stand-in's faults (testdata/standins/faults.h).
func writeFaults(t *testing.T, lines string) {
	t.Helper()
	f := FaultsFile
	if err := os.WriteFile(f, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(f) })
}

// HcsGetOperationResult (reference page): HCS_E_OPERATION_NOT_STARTED for
// an operation not yet used, HCS_E_OPERATION_PENDING while it runs;
// HcsCloseOperation of a running operation returns at once (its page
// requires no wait; hcsshim internal/computecore closes operations it no
// longer waits for); a cancelled stalled operation completes.
func TestOperationStates(t *testing.T) {
	h := load(t)
	sys := h.create(t, "op-states", document(volume(t), false), false)
	op := h.newOp(t, 0, 0)
	if _, err := h.wait(op, 0); !errors.Is(err, hcsOperationNotStart) {
		t.Errorf("an unused operation's result: %v, want HCS_E_OPERATION_NOT_STARTED", err)
	}
	writeFaults(t, "HcsStartComputeSystem stall 0 1\n")
	if err := h.call("HcsStartComputeSystem", sys, op, 0); err != nil {
		t.Fatalf("HcsStartComputeSystem: %v", err)
	}
	var doc *uint16
	if err := h.call("HcsGetOperationResult", op, uintptr(unsafe.Pointer(&doc))); !errors.Is(err, hcsOperationPending) {
		t.Errorf("a running operation's result: %v, want HCS_E_OPERATION_PENDING", err)
	}
	take(doc)
	if _, err := h.wait(op, 100); !errors.Is(err, hcsOperationTimeout) {
		t.Errorf("a wait of 100 ms on a stalled operation: %v, want HCS_E_OPERATION_TIMEOUT", err)
	}
	if err := h.call("HcsCancelOperation", op); err != nil {
		t.Errorf("HcsCancelOperation: %v", err)
	}
	if _, err := h.wait(op, 10000); !errors.Is(err, hcsOperationTimeout) {
		t.Errorf("the cancelled operation's result: %v, want HCS_E_OPERATION_TIMEOUT (faults.h)", err)
	}
	h.closeOp(op)

	op = h.newOp(t, 0, 0)
	writeFaults(t, "HcsStartComputeSystem stall 0 1\n")
	if err := h.call("HcsStartComputeSystem", sys, op, 0); err != nil {
		t.Fatalf("HcsStartComputeSystem: %v", err)
	}
	start := time.Now()
	h.closeOp(op)
	if d := time.Since(start); d > time.Second {
		t.Errorf("HcsCloseOperation of a running operation took %v", d)
	}
}

// HcsCreateOperation (reference page): the callback, when given, is called
// when the operation completes, with the operation's context.
func TestOperationCallback(t *testing.T) {
	h := load(t)
	const ctx = 0x5151
	op := h.newOp(t, ctx, opCallback)
	defer h.closeOp(op)
	if err := h.call("HcsEnumerateComputeSystems", 0, op); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the operation's callback", func() bool {
		opDone.Lock()
		defer opDone.Unlock()
		return opDone.got[ctx] == 1
	})
}

// HcsSetComputeSystemCallback (reference page) registers a callback on a
// handle: a second handle's does not replace the first's, and both hear
// the exit (runhcs terminates through a second handle: hcsshim
// internal/hcs/v2 process.go Kill).
func TestCallbacksPerHandle(t *testing.T) {
	h := load(t)
	first := h.create(t, "per-handle", document(volume(t), false), true)
	second, err := h.open("per-handle")
	if err != nil {
		t.Fatalf("HcsOpenComputeSystem: %v", err)
	}
	defer h.closeSystem(second)
	for i, sys := range []uintptr{first, second} {
		if err := h.call("HcsSetComputeSystemCallback", sys, 0, uintptr(0x100+i), eventCallback); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.run(t, func(op uintptr) error { return h.call("HcsTerminateComputeSystem", second, op, 0) }); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		eventually(t, fmt.Sprintf("handle %d's SystemExited", i), func() bool {
			got := eventsOf(uintptr(0x100 + i))
			return len(got) == 1 && got[0] == eventSystemExited
		})
	}
}

// ProcessParameters (HCS JSON schema): CommandArgs serve when CommandLine
// is empty; HcsGetOperationResultAndProcessInfo (reference page) gives the
// process's id and the pipes asked for, handles of the caller's process.
func TestCommandArgsAndProcessInfo(t *testing.T) {
	h := load(t)
	sys := h.create(t, "command-args", document(volume(t), false), true)
	exe, _ := os.Executable()
	params := fmt.Sprintf(`{"CommandArgs":[%q,"-test.run=^$","with space"],"Environment":{%q:"1"},"CreateStdInPipe":true,"CreateStdOutPipe":true}`, exe, echoEnv)
	var p uintptr
	op := h.newOp(t, 0, 0)
	defer h.closeOp(op)
	if err := h.call("HcsCreateProcess", sys, uintptr(unsafe.Pointer(u16(params))), op, 0, uintptr(unsafe.Pointer(&p))); err != nil {
		t.Fatal(err)
	}
	defer h.dll.NewProc("HcsCloseProcess").Call(p)
	h.wait(op, 20000)
	var info processInfo
	var doc *uint16
	if err := h.call("HcsGetOperationResultAndProcessInfo", op, uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&doc))); err != nil {
		t.Fatalf("HcsGetOperationResultAndProcessInfo: %v %s", err, take(doc))
	}
	if info.ProcessID == 0 || info.StdInput == 0 || info.StdOutput == 0 || info.StdError != 0 {
		t.Fatalf("the process information %+v: want a pid, stdin and stdout, no stderr", info)
	}
	in, err := winio.NewOpenFile(info.StdInput)
	if err != nil {
		t.Fatal(err)
	}
	out, err := winio.NewOpenFile(info.StdOutput)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	in.Write([]byte("through the container"))
	in.Close()
	if _, err := h.run(t, func(op uintptr) error {
		return h.call("HcsModifyProcess", p, op, uintptr(unsafe.Pointer(u16(`{"Operation":"CloseHandle","CloseHandle":{"Handle":"StdIn"}}`))))
	}); err != nil {
		t.Fatalf("HcsModifyProcess CloseHandle StdIn: %v", err)
	}
	b, _ := io.ReadAll(out)
	if string(b) != "through the container" {
		t.Errorf("the process echoed %q", b)
	}
	h.exited(t, p)
}

// A container's computer name is its document's GuestOs.HostName (HCS
// JSON schema v2; hcsshim internal/hcsoci/hcsdoc_wcow.go), its
// COMPUTERNAME the NetBIOS form: upper case, at most 15 characters
// (learn.microsoft.com, "Computer names"). A MappedDirectory appears at
// its ContainerPath whether or not the image holds the folders above it
// (hcsshim makes none; critest's volume specs on containerd's Windows CI
// map host temporary folders).
func TestHostNameAndMappedDirectoryParents(t *testing.T) {
	host := winetest.TempDir(t)
	if err := os.WriteFile(filepath.Join(host, "flag"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := volume(t)
	tests := []struct{ hostName, want string }{
		{"test-hostname", "TEST-HOSTNAME"},
		{"a-very-long-host-name.example", "A-VERY-LONG-HOS"},
	}
	for i, tt := range tests {
		doc := fmt.Sprintf(`{"Owner":"contract","SchemaVersion":{"Major":2,"Minor":1},"Container":{"GuestOs":{"HostName":%q},"Storage":{"Layers":[],"Path":%q},"MappedDirectories":[{"HostPath":%q,"ContainerPath":"C:\\not\\in\\the\\image"}]}}`,
			tt.hostName, vol, host)
		h := load(t)
		sys := h.create(t, fmt.Sprintf("hostname-%d", i), doc, true)
		exe, _ := os.Executable()
		// The stand-in gives the container's C:\ in a command line (Wine
		// has no silo: a process's own C: is the host's).
		params := fmt.Sprintf(`{"CommandArgs":[%q,"-test.run=^$","C:\\not\\in\\the\\image\\flag"],"Environment":{%q:"1"},"CreateStdOutPipe":true}`, exe, reportEnv)
		p, info := h.process(t, sys, params)
		out, err := winio.NewOpenFile(info.StdOutput)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out)
		out.Close()
		h.exited(t, p)
		if !strings.Contains(string(b), "COMPUTERNAME="+tt.want+"\n") || !strings.Contains(string(b), "file=from the host <nil>") {
			t.Errorf("host name %q: the container process printed\n%s\nwant COMPUTERNAME=%s and the mapped file", tt.hostName, b, tt.want)
		}
	}
}
