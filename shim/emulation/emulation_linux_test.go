//go:build linux

package emulation

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/pause"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// These tests run real Wine on real overlay mounts. They need root and the
// template prefix (WINPROC_WINE_PREFIX, set by `make test`).

// fixture is one Backend and the Windows programs the tests run.
type fixture struct {
	b        *Backend
	root     string
	template string
	probe    string // probe.exe (testdata/probe)
	pause    string // pause.exe
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	template := winetest.Prefix(t)
	if os.Geteuid() != 0 {
		t.Skip("the emulation mounts overlays: run as root")
	}
	f := &fixture{template: template}
	f.probe = winetest.BuildExe(t, "./testdata/probe")
	f.pause = winetest.BuildExe(t, "github.com/winproc/winproc/cmd/pause")
	f.root = filepath.Join(t.TempDir(), "root")
	b, err := New(Config{Root: f.root, TemplatePrefix: template})
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	return f
}

// layer makes a layer directory below base with Files/ holding files
// (path: content; content "<whiteout>" makes an overlayfs whiteout,
// "<opaque>" an opaque directory, "<exe:probe>"/"<exe:pause>" a copy of
// the program).
func (f *fixture) layer(t *testing.T, base, name string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(base, name)
	for p, content := range files {
		full := filepath.Join(dir, "Files", filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch content {
		case "<whiteout>":
			err = unix.Mknod(full, unix.S_IFCHR, 0)
		case "<opaque>":
			if err = os.MkdirAll(full, 0o755); err == nil {
				err = unix.Setxattr(full, "trusted.overlay.opaque", []byte("y"), 0)
			}
		case "<exe:probe>", "<exe:pause>":
			src := f.probe
			if content == "<exe:pause>" {
				src = f.pause
			}
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(full, b, 0o755)
			}
		default:
			err = os.WriteFile(full, []byte(content), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scratch makes an empty scratch layer.
func scratch(t *testing.T, base string) string {
	t.Helper()
	dir := filepath.Join(base, "scratch")
	for _, d := range []string{layermount.ScratchUpper, layermount.ScratchWork} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// basicLayers is a one-layer image with the programs.
func (f *fixture) basicLayers(t *testing.T) compute.Layers {
	base := t.TempDir()
	l := f.layer(t, base, "base", map[string]string{"probe.exe": "<exe:probe>", "pause.exe": "<exe:pause>"})
	return compute.Layers{Scratch: scratch(t, base), Parents: []string{l}}
}

// create creates a system and always removes it when the test ends.
func (f *fixture) create(t *testing.T, id string, s *compute.Settings) compute.System {
	t.Helper()
	t.Cleanup(func() {
		if err := f.b.Remove(context.Background(), id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	sys, err := f.b.Create(context.Background(), id, s)
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	return sys
}

// start creates and starts a system.
func (f *fixture) start(t *testing.T, id string, s *compute.Settings) compute.System {
	t.Helper()
	sys := f.create(t, id, s)
	start := time.Now()
	if err := sys.Start(context.Background()); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	t.Logf("%s: wineserver up in %v", id, time.Since(start).Round(time.Millisecond))
	return sys
}

// waitFor waits for ch, failing the test after d.
func waitFor(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not done after %v", what, d)
	}
}

// result is a finished process.
type result struct {
	stdout, stderr string
	code           int
}

// run runs a process to its end.
func run(t *testing.T, sys compute.System, ps compute.ProcessSettings) result {
	t.Helper()
	var stdout, stderr syncbuffer.Buffer
	ps.Stdout, ps.Stderr = &stdout, &stderr
	p, err := sys.CreateProcess(context.Background(), &ps)
	if err != nil {
		t.Fatalf("create process %q: %v", ps.CommandLine, err)
	}
	defer p.Close()
	waitFor(t, p.Wait(), 60*time.Second, ps.CommandLine)
	code, err := p.ExitCode()
	if err != nil {
		t.Fatalf("%q: exit code: %v", ps.CommandLine, err)
	}
	return result{normalize(stdout.String()), normalize(stderr.String()), code}
}

// normalize drops carriage returns (a console writes \r\n).
func normalize(s string) string { return strings.ReplaceAll(s, "\r", "") }

// waitOutput waits until buf holds want.
func waitOutput(t *testing.T, buf *syncbuffer.Buffer, want string, exited <-chan struct{}) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(buf.String(), want) {
		select {
		case <-deadline:
			t.Fatalf("no %q in output %q", want, buf.String())
		case <-exited:
			if !strings.Contains(buf.String(), want) {
				t.Fatalf("exited without printing %q: %q", want, buf.String())
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitIdle waits until process pid sleeps and its CPU time has not moved for
// a second: it has finished starting and waits for an event.
func waitIdle(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last uint64
	stable := 0
	for time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		st, err := readStat(pid)
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		if st.state == 'S' && st.utime+st.stime == last {
			stable++
		} else {
			stable = 0
		}
		last = st.utime + st.stime
		if stable >= 4 {
			return
		}
	}
	t.Fatalf("process %d never settled", pid)
}

// checkGone checks that nothing of system id is left: no mount below
// Root/<id> (read from /proc/self/mountinfo here, not through the package),
// no process with its WINEPREFIX (zombies aside), no directory.
func (f *fixture) checkGone(t *testing.T, id string) {
	t.Helper()
	dir := filepath.Join(f.b.root, id)
	for _, m := range mountsBelow(t, dir) {
		t.Errorf("still mounted: %s", m)
	}
	for _, p := range liveWithEnv(t, "WINEPREFIX="+filepath.Join(dir, prefixDir)) {
		t.Errorf("process %s of the system still runs", p)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

// mountsBelow lists the mount points at or below dir, from
// /proc/self/mountinfo.
func mountsBelow(t *testing.T, dir string) []string {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	return out
}

// liveWithEnv lists the running processes (zombies aside) whose environment
// holds the entry NAME=VALUE.
func liveWithEnv(t *testing.T, entry string) []string {
	t.Helper()
	want := append(append([]byte{0}, entry...), 0)
	pids, err := allPIDs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range pids {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), want) {
			continue
		}
		if st, err := readStat(pid); err == nil && !st.gone() {
			out = append(out, fmt.Sprintf("%d (%s, state %c)", pid, st.comm, st.state))
		}
	}
	return out
}

// checkNoZombies checks that the reaper leaves no Wine zombie among this
// process's children for long.
func (f *fixture) checkNoZombies(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var zombies []string
		pids, err := childPIDs(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if st, err := readStat(pid); err == nil && st.gone() && wineComm(st.comm) {
				zombies = append(zombies, fmt.Sprintf("%d (%s)", pid, st.comm))
			}
		}
		if len(zombies) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("unreaped Wine zombies: %s", strings.Join(zombies, ", "))
			return
		}
		f.b.reaper.poke()
		time.Sleep(100 * time.Millisecond)
	}
}

// openFDs lists this process's open file descriptors.
func openFDs(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := map[string]string{}
	for _, e := range entries {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		fds[e.Name()] = target
	}
	return fds
}

// checkLeaks checks that the file descriptors and goroutines are back to
// what they were (the backend's reaper goroutine ends once no system is
// open).
func checkLeaks(t *testing.T, fds map[string]string, goroutines int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		now := openFDs(t)
		var extra []string
		for fd, target := range now {
			if _, ok := fds[fd]; !ok && !strings.HasPrefix(target, "/proc/") {
				extra = append(extra, fd+" -> "+target)
			}
		}
		stacks := goroutineStacks()
		g := len(stacks)
		if len(extra) == 0 && g <= goroutines {
			return
		}
		if time.Now().After(deadline) {
			if len(extra) > 0 {
				t.Errorf("leaked file descriptors: %s", strings.Join(extra, ", "))
			}
			if g > goroutines {
				t.Errorf("%d goroutines, %d before:\n%s", g, goroutines, strings.Join(stacks, "\n\n"))
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// goroutineStacks returns the stacks of the goroutines, leaving out
// os/signal's, which runs from the first signal.Notify on for good.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "os/signal.signal_recv") {
			out = append(out, g)
		}
	}
	return out
}

// stopAndClose terminates sys, waits for it and closes it.
func stopAndClose(t *testing.T, sys compute.System) {
	t.Helper()
	start := time.Now()
	if err := sys.Terminate(context.Background()); err != nil && !errdefs.IsNotFound(err) {
		t.Fatalf("terminate: %v", err)
	}
	waitFor(t, sys.Wait(), 30*time.Second, "system wait after terminate")
	if err := sys.ExitError(); err != nil {
		t.Errorf("exit error after terminate: %v", err)
	}
	if err := sys.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	t.Logf("terminate + close: %v", time.Since(start).Round(time.Millisecond))
}

// addrNoRandomize is the personality flag setarch -R sets
// (ADDR_NO_RANDOMIZE, linux/personality.h).
const addrNoRandomize = 0x0040000

func TestWine(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	fds, goroutines := openFDs(t), len(goroutineStacks())
	defer func() {
		if t.Failed() {
			return
		}
		f.checkNoZombies(t)
		checkLeaks(t, fds, goroutines)
	}()

	t.Run("System", func(t *testing.T) {
		base := t.TempDir()
		lower := f.layer(t, base, "base", map[string]string{
			"probe.exe":          "<exe:probe>",
			"pause.exe":          "<exe:pause>",
			"my dir/probe.exe":   "<exe:probe>",
			"base.txt":           "base",
			"hidden.txt":         "hidden",
			"override.txt":       "from base",
			"opq/old.txt":        "old",
			"Work/Sub/keep.txt":  "keep",
			"windows/marker.txt": "image's windows dir",
		})
		upperLayer := f.layer(t, base, "mid", map[string]string{
			"hidden.txt":   "<whiteout>",
			"override.txt": "from mid",
			"opq":          "<opaque>",
			"opq/new.txt":  "new",
		})
		sc := scratch(t, base)
		rw, ro := filepath.Join(base, "host-rw"), filepath.Join(base, "host-ro")
		for _, d := range []string{rw, ro} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "in.txt"), []byte("host "+filepath.Base(d)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		settings := &compute.Settings{
			Layers: compute.Layers{Scratch: sc, Parents: []string{upperLayer, lower}},
			MappedDirectories: []compute.MappedDirectory{
				{HostPath: rw, ContainerPath: `C:\data`},
				{HostPath: ro, ContainerPath: `C:\Program Files\ro`, ReadOnly: true},
			},
			Resources: compute.Resources{MemoryLimitBytes: 1 << 30},
		}
		const id = "sys-main"
		sys := f.start(t, id, settings)
		if sys.ID() != id {
			t.Errorf("ID = %q", sys.ID())
		}
		if err := sys.Start(ctx); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("second Start: %v, want failed precondition", err)
		}

		t.Run("OutputAndExitCode", func(t *testing.T) {
			start := time.Now()
			r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe print hello eprint oops exit 3`})
			t.Logf("first process: %v", time.Since(start).Round(time.Millisecond))
			if r.stdout != "hello\n" || r.stderr != "oops\n" || r.code != 3 {
				t.Errorf("got %+v, want stdout hello, stderr oops, exit 3", r)
			}
			start = time.Now()
			r = run(t, sys, compute.ProcessSettings{CommandLine: `"C:\my dir\probe.exe" print "a \"b\"  c" exit 0`})
			t.Logf("second process: %v", time.Since(start).Round(time.Millisecond))
			if r.stdout != "a \"b\"  c\n" || r.code != 0 {
				t.Errorf("quoted command line: got %+v", r)
			}
			// The exit status recorder keeps all 32 bits of a Windows
			// exit code (the kernel keeps 8: 0x3A), and the program sees
			// none of its plumbing.
			r = run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe env LD_PRELOAD env WINPROC_EXIT_FD exit 3221225786`})
			if r.code != 0xC000013A || r.stdout != "LD_PRELOAD unset\nWINPROC_EXIT_FD unset\n" {
				t.Errorf("NTSTATUS exit: got %+v, want exit 0xC000013A and the recorder's variables unset", r)
			}
		})

		t.Run("BareProgramName", func(t *testing.T) {
			r := run(t, sys, compute.ProcessSettings{CommandLine: `probe print found`, WorkingDirectory: `C:\`})
			if r.stdout != "found\n" {
				t.Errorf("got %+v", r)
			}
			r = run(t, sys, compute.ProcessSettings{CommandLine: `cmd /c echo from cmd`})
			if strings.TrimSpace(r.stdout) != "from cmd" || r.code != 0 {
				t.Errorf("cmd: got %+v", r)
			}
		})

		t.Run("EnvAndCwd", func(t *testing.T) {
			r := run(t, sys, compute.ProcessSettings{
				CommandLine:      `C:\probe.exe env FOO env Path env WINEDEBUG env EMPTY cwd read keep.txt`,
				WorkingDirectory: `C:\work\SUB`,
				Env:              []string{"FOO=first", "Path=C:\\tools", "foo=second", "EMPTY="},
			})
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 6 {
				t.Fatalf("output %q", r.stdout)
			}
			if lines[0] != "FOO=second" {
				t.Errorf("env FOO: %q, want FOO=second", lines[0])
			}
			if !strings.HasPrefix(lines[1], `Path=C:\tools;C:\windows\system32`) {
				t.Errorf("env Path: %q, want the spec's in front of Wine's", lines[1])
			}
			if lines[2] != "WINEDEBUG=-all" {
				t.Errorf("env WINEDEBUG: %q", lines[2])
			}
			if lines[3] != "EMPTY=" {
				t.Errorf("env EMPTY: %q", lines[3])
			}
			if !strings.EqualFold(lines[4], `C:\Work\Sub`) {
				t.Errorf("cwd %q, want C:\\Work\\Sub", lines[4])
			}
			if lines[5] != "keep" {
				t.Errorf("relative read: %q", lines[5])
			}
		})

		t.Run("LayersAndScratch", func(t *testing.T) {
			r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe read C:\base.txt read C:\hidden.txt read C:\override.txt read C:\opq\old.txt read C:\opq\new.txt read C:\windows\marker.txt exists C:\windows\system32\bcryptprimitives.dll write C:\written.txt scratch write C:\opq\more.txt more`})
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 9 {
				t.Fatalf("output %q", r.stdout)
			}
			want := []string{"base", "error:", "from mid", "error:", "new", "image's windows dir", "yes", `wrote C:\written.txt`, `wrote C:\opq\more.txt`}
			for i, w := range want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("line %d: %q, want %q", i, lines[i], w)
				}
			}
			if b, err := os.ReadFile(filepath.Join(sc, layermount.ScratchUpper, "written.txt")); err != nil || string(b) != "scratch" {
				t.Errorf("written.txt in the scratch: %q, %v", b, err)
			}
			for _, l := range []string{lower, upperLayer} {
				for _, p := range []string{"written.txt", "opq/more.txt"} {
					if _, err := os.Stat(filepath.Join(l, "Files", p)); err == nil {
						t.Errorf("%s landed in layer %s", p, l)
					}
				}
			}
			if _, err := os.Stat(filepath.Join(f.template, "drive_c", "written.txt")); err == nil {
				t.Error("written.txt landed in the template prefix")
			}
		})

		t.Run("MappedDirectories", func(t *testing.T) {
			r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe read C:\data\in.txt write C:\data\out.txt fromwine read "C:\program files\RO\in.txt" write "C:\Program Files\ro\x.txt" nope`})
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			if len(lines) != 4 {
				t.Fatalf("output %q", r.stdout)
			}
			if lines[0] != "host host-rw" || !strings.HasPrefix(lines[1], "wrote") || lines[2] != "host host-ro" || !strings.HasPrefix(lines[3], "error:") {
				t.Errorf("output %q", lines)
			}
			if b, err := os.ReadFile(filepath.Join(rw, "out.txt")); err != nil || string(b) != "fromwine" {
				t.Errorf("out.txt on the host: %q, %v", b, err)
			}
			if _, err := os.Stat(filepath.Join(ro, "x.txt")); err == nil {
				t.Error("wrote into the read-only mapping")
			}
		})

		t.Run("Stdin", func(t *testing.T) {
			r := run(t, sys, compute.ProcessSettings{
				CommandLine: `C:\probe.exe cat print done`,
				Stdin:       strings.NewReader("line one\nline two\n"),
			})
			if r.stdout != "line one\nline two\ndone\n" {
				t.Errorf("stdout %q", r.stdout)
			}
		})

		t.Run("CloseStdin", func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			defer pw.Close()
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe cat print eof`, Stdin: pr, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			pw.Write([]byte("partial\n"))
			waitOutput(t, &out, "partial", p.Wait())
			if err := p.CloseStdin(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, p.Wait(), 30*time.Second, "cat after CloseStdin")
			if got := normalize(out.String()); got != "partial\neof\n" {
				t.Errorf("stdout %q", got)
			}
			if err := p.CloseStdin(ctx); !errdefs.IsNotFound(err) {
				t.Errorf("CloseStdin after exit: %v, want not found", err)
			}
		})

		t.Run("CtrlCReachesPause", func(t *testing.T) {
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\pause.exe`, Stdout: &out, Stderr: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			waitIdle(t, p.Pid())
			if err := p.Signal(ctx, compute.CtrlC); err != nil {
				t.Fatal(err)
			}
			waitFor(t, p.Wait(), 10*time.Second, "pause after CtrlC")
			if code, err := p.ExitCode(); code != 0 || err != nil {
				t.Errorf("exit code %d, %v, want 0", code, err)
			}
			if got := strings.TrimSpace(normalize(out.String())); got != pause.Message {
				t.Errorf("output %q, want %q", got, pause.Message)
			}
			if err := p.Signal(ctx, compute.CtrlC); !errdefs.IsNotFound(err) {
				t.Errorf("Signal after exit: %v, want not found", err)
			}
		})

		t.Run("CtrlShutdownAndBreak", func(t *testing.T) {
			for _, sig := range []compute.Signal{compute.CtrlBreak, compute.CtrlShutdown} {
				var out syncbuffer.Buffer
				p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe wait exit 7`, Stdout: &out})
				if err != nil {
					t.Fatal(err)
				}
				waitOutput(t, &out, "waiting", p.Wait())
				if err := p.Signal(ctx, sig); err != nil {
					t.Fatal(err)
				}
				waitFor(t, p.Wait(), 10*time.Second, "probe after "+sig.String())
				if code, _ := p.ExitCode(); code != 7 || !strings.Contains(out.String(), "interrupted") {
					t.Errorf("%v: exit %d, output %q", sig, code, out.String())
				}
				p.Close()
			}
		})

		t.Run("Kill", func(t *testing.T) {
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe print up sleep`, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			waitOutput(t, &out, "up", p.Wait())
			// Started without address space randomization (doc.go): a
			// randomized heap can take Wine's fixed shared user data.
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/personality", p.Pid())); err != nil {
				t.Error(err)
			} else if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 16, 32); err != nil || v&addrNoRandomize == 0 {
				t.Errorf("personality %q: want ADDR_NO_RANDOMIZE", b)
			}
			if code, err := p.ExitCode(); err == nil {
				t.Errorf("ExitCode while running = %d, want an error", code)
			}
			if err := p.ResizeConsole(ctx, 10, 10); !errdefs.IsFailedPrecondition(err) {
				t.Errorf("ResizeConsole without a terminal: %v", err)
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			waitFor(t, p.Wait(), 10*time.Second, "probe after Kill")
			if code, err := p.ExitCode(); code != 1 || err != nil {
				t.Errorf("exit code after Kill: %d, %v, want 1", code, err)
			}
			if err := p.Kill(ctx); !errdefs.IsNotFound(err) {
				t.Errorf("Kill after exit: %v, want not found", err)
			}
		})

		t.Run("GrandchildHoldsOutput", func(t *testing.T) {
			// cmd starts a probe that sleeps with cmd's stdout; cmd exits
			// at once. Wait must not wait for the sleeper.
			var out syncbuffer.Buffer
			start := time.Now()
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `cmd /c start /b C:\probe.exe print child sleep & echo parent`, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			waitFor(t, p.Wait(), 30*time.Second, "cmd with a lingering child")
			took := time.Since(start)
			t.Logf("cmd + lingering child: Wait after %v, output %q", took.Round(time.Millisecond), out.String())
			if !strings.Contains(out.String(), "parent") {
				t.Errorf("output %q", out.String())
			}
			// Kill the sleeper, found through the process list.
			procs, err := sys.ProcessList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, pi := range procs {
				if pi.ImageName == "probe.exe" {
					unix.Kill(int(pi.Pid), unix.SIGKILL)
				}
			}
		})

		t.Run("StatsAndProcessList", func(t *testing.T) {
			before, err := sys.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe burn 700 alloc 64`})
			if r.stdout != "burnt true\nallocated 64\n" {
				t.Fatalf("burn: %+v", r)
			}
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe alloc 48 fill C:\stats.bin 200 print ready sleep`, Stdout: &out})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				p.Kill(ctx)
				<-p.Wait()
				p.Close()
			}()
			waitOutput(t, &out, "ready", p.Wait())
			st, err := sys.Stats(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("stats: cpu %v (user %v, kernel %v), commit %d MiB (peak %d), private WS %d MiB, storage r %d/%d B w %d/%d B, uptime %v",
				time.Duration(st.CPU.TotalRuntimeNS), time.Duration(st.CPU.RuntimeUserNS), time.Duration(st.CPU.RuntimeKernelNS),
				st.Memory.CommitBytes>>20, st.Memory.CommitPeakBytes>>20, st.Memory.PrivateWorkingSetBytes>>20,
				st.Storage.ReadCount, st.Storage.ReadBytes, st.Storage.WriteCount, st.Storage.WriteBytes, st.Uptime)
			burnt := time.Duration(st.CPU.TotalRuntimeNS - before.CPU.TotalRuntimeNS)
			if burnt < 300*time.Millisecond {
				t.Errorf("CPU grew by %v over a 700 ms burn, want at least 300 ms", burnt)
			}
			if st.CPU.TotalRuntimeNS != st.CPU.RuntimeUserNS+st.CPU.RuntimeKernelNS {
				t.Errorf("total CPU %d != user %d + kernel %d", st.CPU.TotalRuntimeNS, st.CPU.RuntimeUserNS, st.CPU.RuntimeKernelNS)
			}
			if st.Memory.PrivateWorkingSetBytes < 48<<20 || st.Memory.CommitBytes < 48<<20 || st.Memory.CommitPeakBytes < st.Memory.CommitBytes {
				t.Errorf("memory %+v, want at least the 48 MiB the sleeper holds", st.Memory)
			}
			if st.Uptime <= 0 || st.ContainerStartTime.IsZero() || st.Timestamp.Before(st.ContainerStartTime) {
				t.Errorf("times: start %v, stamp %v, uptime %v", st.ContainerStartTime, st.Timestamp, st.Uptime)
			}
			if st.Storage.WriteBytes < 200<<10 || st.Storage.WriteCount < 4 {
				t.Errorf("storage %+v: want the sleeper's 200 KiB written, 4 I/Os of 64 KiB at least", st.Storage)
			}

			procs, err := sys.ProcessList(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			found := false
			for _, pi := range procs {
				names = append(names, pi.ImageName+":"+strconv.Itoa(int(pi.Pid)))
				if strings.HasPrefix(pi.ImageName, "wineserver") {
					t.Errorf("the wineserver is listed: %+v", pi)
				}
				if int(pi.Pid) == p.Pid() {
					found = true
					if pi.ImageName != "probe.exe" || pi.MemoryWorkingSetPrivateBytes < 48<<20 || pi.MemoryCommitBytes < 48<<20 || time.Since(pi.CreateTimestamp) > time.Minute || pi.CreateTimestamp.After(time.Now()) {
						t.Errorf("process %+v", pi)
					}
				}
			}
			t.Logf("processes: %s", strings.Join(names, " "))
			if !found {
				t.Errorf("probe.exe (pid %d) not in the process list %v", p.Pid(), names)
			}
		})

		t.Run("Terminal", func(t *testing.T) {
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{
				CommandLine: `C:\probe.exe print on-a-console exit 5`, Terminal: true, ConsoleWidth: 100, ConsoleHeight: 30,
				Stdout: &out,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.ResizeConsole(ctx, 120, 40); err != nil && !errdefs.IsNotFound(err) {
				t.Errorf("ResizeConsole: %v", err)
			}
			waitFor(t, p.Wait(), 30*time.Second, "terminal process")
			if code, _ := p.ExitCode(); code != 5 || !strings.Contains(out.String(), "on-a-console") {
				t.Errorf("exit %d, output %q", code, out.String())
			}
		})

		t.Run("ProcessErrors", func(t *testing.T) {
			for _, tc := range []struct {
				ps   compute.ProcessSettings
				want error
			}{
				{compute.ProcessSettings{CommandLine: `C:\nothere.exe`}, errdefs.ErrInvalidArgument},
				{compute.ProcessSettings{CommandLine: `  `}, errdefs.ErrInvalidArgument},
				{compute.ProcessSettings{CommandLine: `C:\probe.exe`, WorkingDirectory: `C:\nodir`}, errdefs.ErrInvalidArgument},
				{compute.ProcessSettings{CommandLine: `C:\probe.exe`, WorkingDirectory: `D:\`}, compute.ErrNotSupported},
				{compute.ProcessSettings{CommandLine: `D:\probe.exe`}, compute.ErrNotSupported},
			} {
				if p, err := sys.CreateProcess(ctx, &tc.ps); !errors.Is(err, tc.want) {
					t.Errorf("%+v: %v, want %v", tc.ps, err, tc.want)
					if p != nil {
						p.Kill(ctx)
					}
				}
			}
			if err := sys.Modify(ctx, compute.Resources{StorageIOPSMaximum: 100}); !errors.Is(err, compute.ErrNotSupported) {
				t.Errorf("Modify of storage QoS: %v, want not supported", err)
			}
			// A memory limit where the machine has the controller; an
			// empty Modify changes nothing.
			if _, ok := v1Hierarchies()["memory"]; ok {
				if err := sys.Modify(ctx, compute.Resources{MemoryLimitBytes: 1 << 30}); err != nil {
					t.Errorf("Modify of the memory limit: %v", err)
				}
			}
			if err := sys.Modify(ctx, compute.Resources{}); err != nil {
				t.Errorf("Modify of nothing: %v", err)
			}
		})

		// CPU affinity, as a job object's: every process of the silo, and
		// every one started later, runs on the processors given.
		t.Run("Affinity", func(t *testing.T) {
			s := sys.(*system)
			for _, cpu := range []int{runtime.NumCPU() - 1, 0} {
				a := []compute.CPUGroupAffinity{{Mask: 1 << cpu}}
				if err := sys.Modify(ctx, compute.Resources{CPUAffinity: a}); err != nil {
					t.Fatal(err)
				}
				p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe sleep 30`})
				if err != nil {
					t.Fatal(err)
				}
				procs, err := s.processes()
				if err != nil {
					t.Fatal(err)
				}
				want := strconv.Itoa(cpu)
				for _, pr := range procs {
					if got := cpusAllowed(t, pr.pid); got != want {
						t.Errorf("CPU %d: process %d runs on CPUs %q", cpu, pr.pid, got)
					}
				}
				p.Kill(ctx)
				waitFor(t, p.Wait(), 30*time.Second, "the killed sleeper")
				p.Close()
			}
			if err := sys.Modify(ctx, compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 1, Group: 40}}}); err == nil {
				t.Error("an affinity to processors the machine lacks was taken")
			}
		})

		t.Run("Terminate", func(t *testing.T) {
			// Leave processes running: a sleeper and a pause.
			for _, cl := range []string{`C:\probe.exe sleep`, `C:\pause.exe`} {
				p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: cl})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				defer func() { waitFor(t, p.Wait(), 10*time.Second, "process after terminate") }()
			}
			stopAndClose(t, sys)
			f.checkGone(t, id)
			if _, err := os.Stat(filepath.Join(sc, layermount.ScratchUpper, "written.txt")); err != nil {
				t.Errorf("the scratch lost its content: %v", err)
			}
			if _, err := os.Stat(filepath.Join(rw, "out.txt")); err != nil {
				t.Errorf("the mapped host directory lost its content: %v", err)
			}
			if _, err := sys.Stats(ctx); !errdefs.IsNotFound(err) {
				t.Errorf("Stats after close: %v, want not found", err)
			}
			if _, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe`}); !errdefs.IsNotFound(err) {
				t.Errorf("CreateProcess after close: %v, want not found", err)
			}
		})
	})

	t.Run("Shutdown", func(t *testing.T) {
		const id = "sys-shutdown"
		sys := f.start(t, id, &compute.Settings{Layers: f.basicLayers(t)})
		var out syncbuffer.Buffer
		p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\pause.exe`, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		waitIdle(t, p.Pid())
		start := time.Now()
		if err := sys.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		waitFor(t, p.Wait(), 10*time.Second, "pause after Shutdown")
		waitFor(t, sys.Wait(), 15*time.Second, "system after Shutdown")
		t.Logf("shutdown: %v", time.Since(start).Round(time.Millisecond))
		if code, _ := p.ExitCode(); code != 0 || strings.TrimSpace(normalize(out.String())) != pause.Message {
			t.Errorf("pause: exit %d, output %q", code, out.String())
		}
		if err := sys.ExitError(); err != nil {
			t.Errorf("exit error: %v", err)
		}
		if err := sys.Terminate(ctx); !errdefs.IsNotFound(err) {
			t.Errorf("Terminate after stop: %v, want not found", err)
		}
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		f.checkGone(t, id)
	})

	t.Run("ServerDies", func(t *testing.T) {
		const id = "sys-lost"
		sys := f.start(t, id, &compute.Settings{Layers: f.basicLayers(t)})
		r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe print hi`})
		if r.stdout != "hi\n" {
			t.Fatalf("%+v", r)
		}
		procs, err := siloProcesses(filepath.Join(f.b.root, id, prefixDir))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range procs {
			if strings.HasPrefix(p.comm, "wineserver") {
				unix.Kill(p.pid, unix.SIGKILL)
			}
		}
		waitFor(t, sys.Wait(), 15*time.Second, "system after its wineserver died")
		if err := sys.ExitError(); err == nil {
			t.Error("no exit error after the wineserver died")
		} else {
			t.Logf("exit error: %v", err)
		}
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		f.checkGone(t, id)
	})

	t.Run("StartFails", func(t *testing.T) {
		// A wineserver that exits at once.
		b, err := New(Config{Root: f.root, TemplatePrefix: f.template})
		if err != nil {
			t.Fatal(err)
		}
		b.wineserver = "/bin/false"
		const id = "sys-nostart"
		t.Cleanup(func() { b.Remove(ctx, id) })
		sys, err := b.Create(ctx, id, &compute.Settings{Layers: f.basicLayers(t)})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := sys.Start(ctx); err == nil {
			t.Fatal("Start succeeded without a wineserver")
		} else {
			t.Logf("Start: %v after %v", err, time.Since(start).Round(time.Millisecond))
		}
		waitFor(t, sys.Wait(), time.Second, "system after a failed start")
		if sys.ExitError() == nil {
			t.Error("no exit error after a failed start")
		}
		if err := sys.Close(); err != nil {
			t.Fatal(err)
		}
		f.checkGone(t, id)
	})

	t.Run("OpenAfterCrash", func(t *testing.T) {
		const id = "sys-crash"
		sys := f.start(t, id, &compute.Settings{Layers: f.basicLayers(t)})
		var out syncbuffer.Buffer
		p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe print up sleep`, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		waitOutput(t, &out, "up", p.Wait())
		// The shim dies: sys and p are dropped without Close. A new shim
		// (a new Backend on the same root) opens the system to delete it.
		// The delete subcommand has no runtime options: no template.
		b2, err := New(Config{Root: f.root})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b2.Create(ctx, "other", &compute.Settings{Layers: f.basicLayers(t)}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Create without a template: %v, want invalid argument", err)
		}
		if _, err := b2.Open(ctx, "nothere"); !errdefs.IsNotFound(err) {
			t.Errorf("Open of a missing system: %v, want not found", err)
		}
		opened, err := b2.Open(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-opened.Wait():
			t.Fatal("the opened system is not running")
		default:
		}
		if err := opened.Start(ctx); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("Start of an opened system: %v, want failed precondition", err)
		}
		procs, err := opened.ProcessList(ctx)
		if err != nil || len(procs) == 0 {
			t.Errorf("ProcessList of the opened system: %v, %v", procs, err)
		}
		stopAndClose(t, opened)
		waitFor(t, p.Wait(), 10*time.Second, "the crashed shim's process")
		f.checkGone(t, id)
		// The dead shim's handles are released (for the leak checks);
		// closing a system another shim removed is harmless.
		waitFor(t, sys.Wait(), 10*time.Second, "the crashed shim's system")
		p.Close()
		if err := sys.Close(); err != nil {
			t.Errorf("close of the removed system: %v", err)
		}
	})

	t.Run("RemoveAfterCrash", func(t *testing.T) {
		const id = "sys-remove"
		sys := f.start(t, id, &compute.Settings{Layers: f.basicLayers(t)})
		p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe sleep`})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.b.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
		f.checkGone(t, id)
		waitFor(t, p.Wait(), 10*time.Second, "process after Remove")
		waitFor(t, sys.Wait(), 10*time.Second, "system after Remove")
		sys.Close()
		if err := f.b.Remove(ctx, id); err != nil {
			t.Errorf("second Remove: %v", err)
		}
	})

	t.Run("CreateFailures", func(t *testing.T) {
		layers := f.basicLayers(t)
		hostDir := t.TempDir()
		for _, tc := range []struct {
			name string
			s    compute.Settings
			want error
		}{
			{"MissingParent", compute.Settings{Layers: compute.Layers{Scratch: layers.Scratch, Parents: []string{layers.Parents[0], "/nonexistent/layer"}}}, os.ErrNotExist},
			{"MissingScratch", compute.Settings{Layers: compute.Layers{Scratch: "/nonexistent/scratch", Parents: layers.Parents}}, os.ErrNotExist},
			// Fails after both overlays are mounted: must roll back.
			{"MissingMappedHostDir", compute.Settings{Layers: layers, MappedDirectories: []compute.MappedDirectory{
				{HostPath: hostDir, ContainerPath: `C:\ok`},
				{HostPath: "/nonexistent/host", ContainerPath: `C:\data`},
			}}, os.ErrNotExist},
			{"OtherDrive", compute.Settings{Layers: layers, MappedDirectories: []compute.MappedDirectory{{HostPath: hostDir, ContainerPath: `D:`}}}, compute.ErrNotSupported},
			{"MappedPipe", compute.Settings{Layers: layers, MappedPipes: []compute.MappedPipe{{HostPath: `\\.\pipe\a`, ContainerPipeName: "b"}}}, compute.ErrNotSupported},
			{"Device", compute.Settings{Layers: layers, AssignedDevices: []compute.Device{{Kind: compute.DeviceClass, ID: "5B45201D-F2F2-4F3B-85BB-30FF1F953599"}}}, compute.ErrNotSupported},
		} {
			t.Run(tc.name, func(t *testing.T) {
				id := "fail-" + strings.ToLower(tc.name)
				t.Cleanup(func() { f.b.Remove(ctx, id) })
				sys, err := f.b.Create(ctx, id, &tc.s)
				if !errors.Is(err, tc.want) {
					t.Errorf("Create: %v, want %v", err, tc.want)
				}
				if sys != nil {
					t.Error("Create returned a system with an error")
				}
				t.Logf("%v", err)
				f.checkGone(t, id)
			})
		}
		if _, err := f.b.Create(ctx, "../escape", &compute.Settings{Layers: layers}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("Create with a bad id: %v", err)
		}
		if _, err := os.ReadDir(hostDir); err != nil {
			t.Errorf("host directory: %v", err)
		}
	})

	t.Run("AlreadyExistsAndNeverStarted", func(t *testing.T) {
		const id = "sys-twice"
		layers := f.basicLayers(t)
		sys := f.create(t, id, &compute.Settings{Layers: layers})
		if _, err := f.b.Create(ctx, id, &compute.Settings{Layers: layers}); !errdefs.IsAlreadyExists(err) {
			t.Errorf("second Create: %v, want already exists", err)
		}
		if _, err := sys.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `C:\probe.exe`}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("CreateProcess before Start: %v, want failed precondition", err)
		}
		// A created system never started: Terminate stops it at once.
		stopAndClose(t, sys)
		f.checkGone(t, id)
	})

	t.Run("ManyLayers", func(t *testing.T) {
		// 150 parents with long paths need more than a page of overlay
		// options: the new mount API. One path holds ':' and ',', which
		// mount(2) would need escaped.
		base := filepath.Join(t.TempDir(), strings.Repeat("long-directory-name-", 3))
		var parents []string
		for i := range 150 {
			files := map[string]string{fmt.Sprintf("layer%03d.txt", i): strconv.Itoa(i), "top.txt": strconv.Itoa(i)}
			if i == 149 {
				files["probe.exe"] = "<exe:probe>"
			}
			name := fmt.Sprintf("layer-%03d", i)
			if i == 7 {
				name = "odd:name,with-separators"
			}
			parents = append(parents, f.layer(t, base, name, files))
		}
		const id = "sys-many"
		s := &compute.Settings{Layers: compute.Layers{Scratch: scratch(t, base), Parents: parents}}
		if n := len(overlayData(parents, "u", "w")); n < os.Getpagesize() {
			t.Fatalf("overlay options %d bytes, want more than a page", n)
		}
		sys := f.start(t, id, s)
		r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe read C:\top.txt read C:\layer000.txt read C:\layer007.txt read C:\layer149.txt`})
		if r.stdout != "0\n0\n7\n149\n" {
			t.Errorf("output %q", r.stdout)
		}
		stopAndClose(t, sys)
		f.checkGone(t, id)
	})

	t.Run("SeparatorsInPaths", func(t *testing.T) {
		// Few layers: mount(2) with escaped options.
		base := filepath.Join(t.TempDir(), "a:b,c")
		l := f.layer(t, base, "x:y,z", map[string]string{"probe.exe": "<exe:probe>"})
		const id = "sys-separators"
		sys := f.start(t, id, &compute.Settings{Layers: compute.Layers{Scratch: scratch(t, base), Parents: []string{l}}})
		r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe write C:\w.txt ok`})
		if !strings.HasPrefix(r.stdout, "wrote") {
			t.Errorf("output %q", r.stdout)
		}
		if _, err := os.Stat(filepath.Join(base, "scratch", layermount.ScratchUpper, "w.txt")); err != nil {
			t.Error(err)
		}
		stopAndClose(t, sys)
		f.checkGone(t, id)
	})
}

// cpusAllowed is the Cpus_allowed_list of every thread of process pid, or
// "mixed".
func cpusAllowed(t *testing.T, pid int) string {
	t.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		t.Fatal(err)
	}
	list := ""
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				v = strings.TrimSpace(v)
				if list != "" && list != v {
					return "mixed"
				}
				list = v
			}
		}
	}
	return list
}
