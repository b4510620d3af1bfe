//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// TestWine's subjects beside the shared system: each makes and ends its own.

// wineShutdown is TestWine/Shutdown.
func wineShutdown(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineServerDies is TestWine/ServerDies.
func wineServerDies(t *testing.T, f *fixture) {
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
}

// wineStartFails is TestWine/StartFails.
func wineStartFails(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineOpenAfterCrash is TestWine/OpenAfterCrash.
func wineOpenAfterCrash(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineRemoveAfterCrash is TestWine/RemoveAfterCrash.
func wineRemoveAfterCrash(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineCreateFailures is TestWine/CreateFailures.
func wineCreateFailures(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineAlreadyExistsAndNeverStarted is TestWine/AlreadyExistsAndNeverStarted.
func wineAlreadyExistsAndNeverStarted(t *testing.T, f *fixture) {
	ctx := context.Background()
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
}

// wineManyLayers is TestWine/ManyLayers.
func wineManyLayers(t *testing.T, f *fixture) {
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
}

// wineSeparatorsInPaths is TestWine/SeparatorsInPaths.
func wineSeparatorsInPaths(t *testing.T, f *fixture) {
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
}
