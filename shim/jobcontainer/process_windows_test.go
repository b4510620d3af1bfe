//go:build windows

package jobcontainer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
)

// stdHandles is the helper's stdhandles command: it writes ttyMarker to
// its standard output and error, then what each of its standard handles
// is (its type, and whether it is a console's) to report.
func stdHandles(report string) int {
	fmt.Fprintln(os.Stdout, ttyMarker)
	fmt.Fprintln(os.Stderr, ttyMarker)
	var b strings.Builder
	for _, s := range []struct {
		name string
		std  uint32
	}{{"stdin", windows.STD_INPUT_HANDLE}, {"stdout", windows.STD_OUTPUT_HANDLE}, {"stderr", windows.STD_ERROR_HANDLE}} {
		h, _ := windows.GetStdHandle(s.std)
		var mode uint32
		console := windows.GetConsoleMode(h, &mode) == nil
		t, _ := windows.GetFileType(h)
		fmt.Fprintf(&b, "%s=%#x type=%d console=%v\n", s.name, h, t, console)
	}
	if err := os.WriteFile(report, []byte(b.String()), 0o644); err != nil {
		return 5
	}
	return 0
}

const ttyMarker = "tty-output"

// A Terminal process's standard handles are its pseudo console's, not the
// shim's own: with the shim's stdout and stderr a file (as the shim's are
// NUL and its panic log), what the process writes does not reach the
// file. On Windows it reaches the console's output. Wine 8 makes the
// pseudo console but does not attach the process to it: there the
// process gets the null handles it is given (and the shim's without the
// flag, as Windows does: microsoft/terminal#11276), and its output is
// lost either way.
func TestUnderWineTerminalHandles(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	dir := winetest.TempDir(t)
	own := filepath.Join(dir, "shim-stdio.txt")
	report := filepath.Join(dir, "report.txt")
	f := shimStdio(t, own)
	var out syncbuffer.Buffer
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe stdhandles ` + report, Terminal: true, Stdout: &out})
	f()
	if code := waitExit(t, p); code != 0 {
		t.Errorf("exit %d", code)
	}
	got, _ := os.ReadFile(report)
	written, _ := os.ReadFile(own)
	t.Logf("the process's handles:\n%s", got)
	if strings.Contains(string(written), ttyMarker) {
		t.Errorf("the Terminal process wrote to the shim's own stdout or stderr: %q", written)
	}
	if strings.Contains(string(got), fmt.Sprintf("type=%d", windows.FILE_TYPE_DISK)) {
		t.Errorf("the Terminal process got the shim's file as a standard handle:\n%s", got)
	}
	if !isWine() && (!strings.Contains(out.String(), ttyMarker) || strings.Contains(string(got), "console=false")) {
		t.Errorf("the console's output %q; the process's handles:\n%s", out.String(), got)
	}
}

// shimStdio makes the test's own standard output and error the file
// path, inheritable, as the shim's are NUL and its panic log; the
// function returned restores them (as does the test's cleanup).
func shimStdio(t *testing.T, path string) func() {
	t.Helper()
	sa := &windows.SecurityAttributes{InheritHandle: 1}
	sa.Length = uint32(unsafe.Sizeof(*sa))
	name, err := windows.UTF16PtrFromString(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := windows.CreateFile(name, windows.GENERIC_WRITE, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE, sa, windows.CREATE_ALWAYS, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { windows.CloseHandle(f) })
	oldOut, _ := windows.GetStdHandle(windows.STD_OUTPUT_HANDLE)
	oldErr, _ := windows.GetStdHandle(windows.STD_ERROR_HANDLE)
	for _, std := range []uint32{windows.STD_OUTPUT_HANDLE, windows.STD_ERROR_HANDLE} {
		if err := windows.SetStdHandle(std, f); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		windows.SetStdHandle(windows.STD_OUTPUT_HANDLE, oldOut)
		windows.SetStdHandle(windows.STD_ERROR_HANDLE, oldErr)
	}
	t.Cleanup(restore)
	return restore
}

// startInJob is the helper's breakaway command: in a job of its own
// without JOB_OBJECT_LIMIT_BREAKAWAY_OK, it starts itself through the
// binding, as the backend starts a container's process, and prints what
// the backend makes of the failure.
func startInJob() int {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		fmt.Println("CreateJobObject:", err)
		return 4
	}
	defer windows.CloseHandle(job)
	if err := windows.AssignProcessToJobObject(job, windows.CurrentProcess()); err != nil {
		fmt.Println("AssignProcessToJobObject:", err)
		return 4
	}
	b := newBackend(windowsHost{}, Options{})
	tok, err := b.host.processToken()
	if err != nil {
		fmt.Println("processToken:", err)
		return 4
	}
	defer b.host.closeHandle(tok)
	self, _ := os.Executable()
	st, err := b.host.createProcess(startParams{token: tok, application: self, commandLine: "app.exe exit 0", env: os.Environ(), dir: filepath.Dir(self)})
	if err == nil {
		b.host.terminateProcess(st.process, 0)
		b.host.closeHandle(st.process)
		b.host.closeHandle(st.thread)
		fmt.Println("started")
		return 0
	}
	fmt.Println("access denied:", errors.Is(err, windows.ERROR_ACCESS_DENIED))
	fmt.Println("refused:", b.startFailed(self, err))
	return 0
}

// In a job without breakaway, CreateProcess with CREATE_BREAKAWAY_FROM_JOB
// is refused with access denied (CreateProcessW's documentation), and the
// error says so and how to fix it.
func TestUnderWineStartInJobWithoutBreakaway(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "breakaway")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper: %v\n%s", err, out)
	}
	for _, want := range []string{"access denied: true", "refused:", "JOB_OBJECT_LIMIT_BREAKAWAY_OK", "failed precondition"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the start in a job without breakaway: %s; want %q", out, want)
		}
	}
}

// A program without an extension, named with its path (as Kubernetes'
// agnhost image names its entrypoint), starts: CreateProcess gets the
// file as named.
func TestUnderWineProgramWithoutExtension(t *testing.T) {
	for _, line := range []string{`%CONTAINER_SANDBOX_MOUNT_POINT%\agnhost exit 7`, `/agnhost exit 7`} {
		t.Run(line, func(t *testing.T) {
			sys := container(t, realBackend(t), nil)
			exe, err := os.ReadFile(filepath.Join(sys.(*system).mountPoint, "app.exe"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(sys.(*system).mountPoint, "agnhost"), exe, 0o755); err != nil {
				t.Fatal(err)
			}
			p := start(t, sys, &compute.ProcessSettings{CommandLine: line})
			if code := waitExit(t, p); code != 7 {
				t.Errorf("exit %d, want 7", code)
			}
		})
	}
}
