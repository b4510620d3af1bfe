//go:build linux

package emulation

import (
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
	"github.com/winproc/winproc/pause"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// TestWine's compute system of many subjects: one system, started once,
// that each subject's subtest uses in turn; Terminate, the last, stops it.

// wineSystem is the system TestWine/System's subtests share, and what it
// was made from.
type wineSystem struct {
	f                                 *fixture
	sys                               compute.System
	id, sc, rw, ro, lower, upperLayer string
}

// wineSystemTests starts the shared system and runs each subject on it.
func wineSystemTests(t *testing.T, f *fixture) {
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
	if err := sys.Start(context.Background()); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("second Start: %v, want failed precondition", err)
	}
	w := &wineSystem{f: f, sys: sys, id: id, sc: sc, rw: rw, ro: ro, lower: lower, upperLayer: upperLayer}
	for _, s := range []struct {
		name string
		run  func(*testing.T, *wineSystem)
	}{
		{"OutputAndExitCode", wineSystemOutputAndExitCode},
		{"BareProgramName", wineSystemBareProgramName},
		{"EnvAndCwd", wineSystemEnvAndCwd},
		{"LayersAndScratch", wineSystemLayersAndScratch},
		{"MappedDirectories", wineSystemMappedDirectories},
		{"Stdin", wineSystemStdin},
		{"CtrlCReachesPause", wineSystemCtrlCReachesPause},
		{"CtrlShutdownAndBreak", wineSystemCtrlShutdownAndBreak},
		{"Kill", wineSystemKill},
		{"GrandchildHoldsOutput", wineSystemGrandchildHoldsOutput},
		{"StatsAndProcessList", wineSystemStatsAndProcessList},
		{"Terminal", wineSystemTerminal},
		{"ProcessErrors", wineSystemProcessErrors},
		{"Affinity", wineSystemAffinity},
		{"Terminate", wineSystemTerminate},
	} {
		t.Run(s.name, func(t *testing.T) { s.run(t, w) })
	}
}

// wineSystemOutputAndExitCode is TestWine/System/OutputAndExitCode.
func wineSystemOutputAndExitCode(t *testing.T, w *wineSystem) {
	sys := w.sys
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
}

// wineSystemBareProgramName is TestWine/System/BareProgramName.
func wineSystemBareProgramName(t *testing.T, w *wineSystem) {
	sys := w.sys
	r := run(t, sys, compute.ProcessSettings{CommandLine: `probe print found`, WorkingDirectory: `C:\`})
	if r.stdout != "found\n" {
		t.Errorf("got %+v", r)
	}
	r = run(t, sys, compute.ProcessSettings{CommandLine: `cmd /c echo from cmd`})
	if strings.TrimSpace(r.stdout) != "from cmd" || r.code != 0 {
		t.Errorf("cmd: got %+v", r)
	}
}

// wineSystemEnvAndCwd is TestWine/System/EnvAndCwd.
func wineSystemEnvAndCwd(t *testing.T, w *wineSystem) {
	sys := w.sys
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
}

// wineSystemLayersAndScratch is TestWine/System/LayersAndScratch.
func wineSystemLayersAndScratch(t *testing.T, w *wineSystem) {
	sys, sc, lower, upperLayer, f := w.sys, w.sc, w.lower, w.upperLayer, w.f
	r := run(t, sys, compute.ProcessSettings{CommandLine: `C:\probe.exe read C:\base.txt read C:\hidden.txt read C:\override.txt read C:\opq\old.txt read C:\opq\new.txt read C:\windows\marker.txt exists C:\windows\system32\bcryptprimitives.dll write C:\written.txt scratch write C:\opq\more.txt more`})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 9 {
		t.Fatalf("output %q", r.stdout)
	}
	want := []string{"base", "error:", "from mid", "error:", "new", "image's windows dir", "yes", `wrote C:\written.txt`, `wrote C:\opq\more.txt`}
	for i, line := range want {
		if !strings.HasPrefix(lines[i], line) {
			t.Errorf("line %d: %q, want %q", i, lines[i], line)
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
}

// wineSystemMappedDirectories is TestWine/System/MappedDirectories.
func wineSystemMappedDirectories(t *testing.T, w *wineSystem) {
	sys, rw, ro := w.sys, w.rw, w.ro
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
}

// wineSystemStdin is TestWine/System/Stdin.
func wineSystemStdin(t *testing.T, w *wineSystem) {
	sys := w.sys
	r := run(t, sys, compute.ProcessSettings{
		CommandLine: `C:\probe.exe cat print done`,
		Stdin:       strings.NewReader("line one\nline two\n"),
	})
	if r.stdout != "line one\nline two\ndone\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

// wineSystemCtrlCReachesPause is TestWine/System/CtrlCReachesPause.
func wineSystemCtrlCReachesPause(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemCtrlShutdownAndBreak is TestWine/System/CtrlShutdownAndBreak.
func wineSystemCtrlShutdownAndBreak(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemKill is TestWine/System/Kill.
func wineSystemKill(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemGrandchildHoldsOutput is TestWine/System/GrandchildHoldsOutput.
func wineSystemGrandchildHoldsOutput(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemStatsAndProcessList is TestWine/System/StatsAndProcessList.
func wineSystemStatsAndProcessList(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemTerminal is TestWine/System/Terminal.
func wineSystemTerminal(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemProcessErrors is TestWine/System/ProcessErrors.
func wineSystemProcessErrors(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// CPU affinity, as a job object's: every process of the silo, and
// every one started later, runs on the processors given.
func wineSystemAffinity(t *testing.T, w *wineSystem) {
	sys := w.sys
	ctx := context.Background()
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
}

// wineSystemTerminate is TestWine/System/Terminate.
func wineSystemTerminate(t *testing.T, w *wineSystem) {
	sys, id, sc, rw, f := w.sys, w.id, w.sc, w.rw, w.f
	ctx := context.Background()
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
}
