//go:build linux

// TestWineHostProcess's subtests of how HostProcess containers stop, are
// terminated, are opened after a crash, lose the host's wineserver and are
// created together.

package emulation

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/snapshotter/layermount"
)

func (h *hostProcessSuite) stopsLikeAJob(t *testing.T) {
	ctx := context.Background()
	// Shutdown: console events to every process, which exit.
	c := h.f.start(t, "hpc-c", &compute.Settings{Layers: h.f.basicLayers(t), HostProcess: &compute.HostProcess{}})
	p := startInit(t, c)
	defer p.Close()
	waitIdle(t, p.Pid())
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p.Wait(), 10*time.Second, "pause after Shutdown")
	waitFor(t, c.Wait(), 15*time.Second, "container after Shutdown")
	if code, err := p.ExitCode(); code != 0 || err != nil || c.ExitError() != nil {
		t.Errorf("after Shutdown: pause exit %d, %v; exit error %v", code, err, c.ExitError())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	h.f.checkHostProcessGone(t, "hpc-c")
	// Its last process ending stops it.
	d := h.f.start(t, "hpc-d", &compute.Settings{Layers: h.f.basicLayers(t), HostProcess: &compute.HostProcess{}})
	if r := run(t, d, compute.ProcessSettings{CommandLine: `probe print bye exit 4`, User: systemUser}); r.stdout != "bye\n" || r.code != 4 {
		t.Errorf("got %+v", r)
	}
	waitFor(t, d.Wait(), 10*time.Second, "container after its last process")
	if err := d.ExitError(); err != nil {
		t.Errorf("exit error %v", err)
	}
	if _, err := d.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `probe`, User: systemUser}); !errdefs.IsNotFound(err) {
		t.Errorf("CreateProcess after the stop: %v, want not found", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	h.f.checkHostProcessGone(t, "hpc-d")
}

func (h *hostProcessSuite) terminateOneOfTwo(t *testing.T) {
	ctx := context.Background()
	pa, pb := startSleeper(t, h.hpcA), startSleeper(t, h.hpcB)
	defer pb.Close()
	procs, err := h.hpcB.ProcessList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pi := range procs {
		if int(pi.Pid) == pa.Pid() {
			t.Errorf("the other container's process %d is in the process list", pa.Pid())
		}
	}
	// Wine's own processes are the host prefix's, in its cgroup: a
	// container lists (and ends) only its own.
	for _, pi := range procs {
		if pi.ImageName != "pause.exe" && pi.ImageName != "probe.exe" {
			t.Errorf("process %d %s is in the container", pi.Pid, pi.ImageName)
		}
	}
	host, err := siloMembers(h.f.b.cgroups.siloOf(h.f.b.hostDir()), "")
	if err != nil || !slices.ContainsFunc(host, func(p procStat) bool { return imageName(p) == "services.exe" }) {
		t.Errorf("the host prefix's cgroup holds %+v, %v: want Wine's services.exe", host, err)
	}
	if !slices.ContainsFunc(procs, func(pi compute.ProcessInfo) bool { return int(pi.Pid) == pb.Pid() }) {
		t.Errorf("process %d not in the process list %+v", pb.Pid(), procs)
	}
	stopAndClose(t, h.hpcA)
	for _, p := range []compute.Process{pa, h.initA} {
		waitFor(t, p.Wait(), 10*time.Second, "the terminated container's process")
		if code, err := p.ExitCode(); code != 1 || err != nil {
			t.Errorf("the terminated container's process: exit code %d, %v, want 1", code, err)
		}
	}
	pa.Close()
	h.f.checkHostProcessGone(t, "hpc-a")
	if _, err := os.Stat(filepath.Join(h.scratchA, layermount.ScratchUpper, "written.txt")); err != nil {
		t.Errorf("the scratch lost its content: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(h.hostData, "in.txt")); err != nil || string(b) != "mapped" {
		t.Errorf("the mapped host directory: %q, %v", b, err)
	}
	select {
	case <-pb.Wait():
		t.Fatal("the other container's process ended with the terminated container")
	case <-h.hpcB.Wait():
		t.Fatal("the other container stopped")
	default:
	}
	if !hostRunning(h.f.b) {
		t.Fatal("the host prefix's wineserver ended with a container")
	}
	if r := run(t, h.hpcB, compute.ProcessSettings{CommandLine: `probe print still`, User: systemUser}); r.stdout != "still\n" {
		t.Errorf("the other container: %+v", r)
	}
	st, err := h.hpcB.Stats(ctx)
	if err != nil || st.CPU.TotalRuntimeNS == 0 || st.Memory.CommitBytes == 0 {
		t.Errorf("stats %+v, %v", st, err)
	}
}

func (h *hostProcessSuite) openAfterCrash(t *testing.T) {
	ctx := context.Background()
	p := startSleeper(t, h.hpcB)
	// The shim dies: h.hpcB and p are dropped without Close. The delete
	// subcommand's Backend has no template.
	b2, err := New(Config{Root: h.f.root})
	if err != nil {
		t.Fatal(err)
	}
	opened, err := b2.Open(ctx, "hpc-b")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-opened.Wait():
		t.Fatal("the opened container is not running")
	default:
	}
	procs, err := opened.ProcessList(ctx)
	if err != nil || !slices.ContainsFunc(procs, func(pi compute.ProcessInfo) bool { return int(pi.Pid) == p.Pid() }) {
		t.Errorf("the opened container's processes %+v, %v: want %d", procs, err, p.Pid())
	}
	stopAndClose(t, opened)
	waitFor(t, p.Wait(), 10*time.Second, "the crashed shim's process")
	waitFor(t, h.initB.Wait(), 10*time.Second, "the crashed shim's init process")
	h.f.checkHostProcessGone(t, "hpc-b")
	// It was the host prefix's last user.
	h.f.checkHostGone(t)
	waitFor(t, h.hpcB.Wait(), 10*time.Second, "the crashed shim's container")
	p.Close()
	if err := h.hpcB.Close(); err != nil {
		t.Errorf("close of the removed container: %v", err)
	}
}

func (h *hostProcessSuite) hostServerDies(t *testing.T) {
	ctx := context.Background()
	e := h.f.start(t, "hpc-e", &compute.Settings{Layers: h.f.basicLayers(t), HostProcess: &compute.HostProcess{}})
	p := startInit(t, e)
	defer p.Close()
	st, err := loadState(h.f.b.hostDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Kill(st.ServerPID, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, e.Wait(), 15*time.Second, "container after the host prefix's wineserver died")
	if err := e.ExitError(); err == nil {
		t.Error("no exit error after the host prefix's wineserver died")
	} else {
		t.Logf("exit error: %v", err)
	}
	waitFor(t, p.Wait(), 10*time.Second, "process after the host prefix's wineserver died")
	// The next container makes the host prefix again.
	g := h.f.start(t, "hpc-g", &compute.Settings{Layers: h.f.basicLayers(t), HostProcess: &compute.HostProcess{}})
	gInit := startInit(t, g)
	defer gInit.Close()
	if r := run(t, g, compute.ProcessSettings{CommandLine: `probe print again`, User: systemUser}); r.stdout != "again\n" {
		t.Errorf("in the new host prefix: %+v", r)
	}
	if now, err := loadState(h.f.b.hostDir()); err != nil || now.ServerPID == st.ServerPID {
		t.Errorf("host prefix state %+v, %v: want a new wineserver", now, err)
	}
	// Remove, the delete subcommand's last resort, for one; Close
	// for the other, the host prefix's last user.
	if err := h.f.b.Remove(ctx, "hpc-e"); err != nil {
		t.Fatal(err)
	}
	h.f.checkHostProcessGone(t, "hpc-e")
	if err := e.Close(); err != nil {
		t.Errorf("close of the removed container: %v", err)
	}
	if !hostRunning(h.f.b) {
		t.Error("removing one container ended the host prefix another uses")
	}
	stopAndClose(t, g)
	waitFor(t, gInit.Wait(), 10*time.Second, "the terminated container's process")
	h.f.checkHostProcessGone(t, "hpc-g")
	h.f.checkHostGone(t)
}

func (h *hostProcessSuite) concurrentCreates(t *testing.T) {
	ctx := context.Background()
	// Two shims (two Backends: their flocks on Root exclude each
	// other as two processes' do) create the first HostProcess
	// containers at once: one host prefix is made, and both join it.
	other, err := New(Config{Root: h.f.root, TemplatePrefix: h.f.template})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"hpc-x", "hpc-y"}
	systems := make([]compute.System, 2)
	errs := make(chan error, 2)
	for i, b := range []*Backend{h.f.b, other} {
		layers := h.f.basicLayers(t)
		t.Cleanup(func() { b.Remove(context.Background(), ids[i]) })
		go func() {
			sys, err := b.Create(ctx, ids[i], &compute.Settings{Layers: layers, HostProcess: &compute.HostProcess{}})
			if err == nil {
				err = sys.Start(ctx)
			}
			systems[i] = sys
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var servers []int
	for i, sys := range systems {
		p := startInit(t, sys)
		defer p.Close()
		if r := run(t, sys, compute.ProcessSettings{CommandLine: `probe print ok`, User: systemUser}); r.stdout != "ok\n" {
			t.Errorf("%s: %+v", ids[i], r)
		}
		servers = append(servers, sys.(*system).st.HostProcess.ServerPID)
	}
	if servers[0] != servers[1] {
		t.Errorf("wineservers %v, want one for both", servers)
	}
	for i, sys := range systems {
		stopAndClose(t, sys)
		h.f.checkHostProcessGone(t, ids[i])
	}
	h.f.checkHostGone(t)
}
