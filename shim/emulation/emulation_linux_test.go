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
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
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
	fds, goroutines := openFDs(t), len(goroutineStacks())
	defer func() {
		if t.Failed() {
			return
		}
		f.checkNoZombies(t)
		checkLeaks(t, fds, goroutines)
	}()

	for _, s := range []struct {
		name string
		run  func(*testing.T, *fixture)
	}{
		{"System", wineSystemTests},
		{"Shutdown", wineShutdown},
		{"ServerDies", wineServerDies},
		{"StartFails", wineStartFails},
		{"OpenAfterCrash", wineOpenAfterCrash},
		{"RemoveAfterCrash", wineRemoveAfterCrash},
		{"CreateFailures", wineCreateFailures},
		{"AlreadyExistsAndNeverStarted", wineAlreadyExistsAndNeverStarted},
		{"ManyLayers", wineManyLayers},
		{"SeparatorsInPaths", wineSeparatorsInPaths},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, f) })
	}
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
