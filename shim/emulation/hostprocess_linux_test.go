//go:build linux

package emulation

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// systemUser is NT AUTHORITY\SYSTEM, what HostProcess pods usually run as.
const systemUser = `NT AUTHORITY\SYSTEM`

// checkHostProcessGone checks that nothing of HostProcess container id is
// left: its directory, its mount point and any mount there, its cgroups,
// and its processes.
func (f *fixture) checkHostProcessGone(t *testing.T, id string) {
	t.Helper()
	f.checkGone(t, id)
	mp := f.b.hostMountPoint(id)
	for _, m := range mountsBelow(t, mp) {
		t.Errorf("still mounted: %s", m)
	}
	if _, err := os.Stat(mp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("mount point %s still exists (%v)", mp, err)
	}
	dir := filepath.Join(f.b.root, id)
	cgroups := []string{SiloCgroup(dir)}
	for _, c := range existingLimitCgroups(dir) {
		cgroups = append(cgroups, c)
	}
	for _, c := range cgroups {
		if _, err := os.Stat(c); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s still exists (%v)", c, err)
		}
	}
	for _, p := range liveWithEnv(t, compute.SandboxMountPointEnv+`=C:\hpc\`+id+`\`) {
		t.Errorf("process %s of the container still runs", p)
	}
}

// checkHostGone checks that the host prefix is gone: its directory, mount,
// cgroup, wineserver and Wine's processes.
func (f *fixture) checkHostGone(t *testing.T) {
	t.Helper()
	dir := f.b.hostDir()
	for _, m := range mountsBelow(t, dir) {
		t.Errorf("still mounted: %s", m)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
	if c := SiloCgroup(dir); c != "" {
		if _, err := os.Stat(c); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the host prefix's cgroup %s still exists (%v)", c, err)
		}
	}
	for _, p := range liveWithEnv(t, "WINEPREFIX="+f.b.hostPrefix()) {
		t.Errorf("process %s of the host prefix still runs", p)
	}
}

// hostRunning reports whether the host prefix's wineserver runs.
func hostRunning(b *Backend) bool {
	st, err := loadState(b.hostDir())
	return err == nil && processAlive(st.ServerPID, st.ServerStart)
}

// hostPath is the Windows path of a Linux path through Wine's Z: drive.
func hostPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// startInit starts the container's init process, pause.exe, which keeps
// it running: a HostProcess container stops when its last process has
// exited, as a job object's does.
func startInit(t *testing.T, sys compute.System) compute.Process {
	t.Helper()
	p, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `pause.exe`, User: systemUser})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startSleeper starts `probe print up sleep` and waits for "up".
func startSleeper(t *testing.T, sys compute.System) compute.Process {
	t.Helper()
	var out syncbuffer.Buffer
	p, err := sys.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: `probe print up sleep`, User: systemUser, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &out, "up", p.Wait())
	return p
}

// hostProcessSuite is TestWineHostProcess's two HostProcess containers,
// which its subtests share: hpcA with an image of its own and a read-only
// mapped directory, hpcB with limits. Each runs pause.exe as its init.
type hostProcessSuite struct {
	f                  *fixture
	hpcA, hpcB         compute.System
	initA, initB       compute.Process
	scratchA, hostData string
	mpA                string // hpcA's mount point, C:\hpc\hpc-a
}

func TestWineHostProcess(t *testing.T) {
	f := newFixture(t)
	if _, err := siloCgroups(); err != nil {
		t.Skipf("HostProcess containers need a cgroup v2 hierarchy: %v", err)
	}
	fds, goroutines := openFDs(t), len(goroutineStacks())
	defer func() {
		if t.Failed() {
			return
		}
		f.checkNoZombies(t)
		checkLeaks(t, fds, goroutines)
	}()

	// The last container's teardown removes the host prefix; should a
	// failed test leave it, it goes after the containers' cleanups.
	t.Cleanup(func() {
		if err := f.b.removeHost(context.Background(), nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	h := &hostProcessSuite{f: f, mpA: `C:\hpc\hpc-a`}
	base := t.TempDir()
	image := f.layer(t, base, "image", map[string]string{
		"probe.exe": "<exe:probe>", "pause.exe": "<exe:pause>", "image.txt": "from the image", "sub/x.txt": "x",
	})
	h.hostData = filepath.Join(base, "host-data")
	if err := os.MkdirAll(h.hostData, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.hostData, "in.txt"), []byte("mapped"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.scratchA = scratch(t, base)
	h.hpcA = f.start(t, "hpc-a", &compute.Settings{
		Layers:            compute.Layers{Scratch: h.scratchA, Parents: []string{image}},
		HostProcess:       &compute.HostProcess{},
		MappedDirectories: []compute.MappedDirectory{{HostPath: h.hostData, ContainerPath: `C:\data`, ReadOnly: true}},
	})
	limits := compute.Resources{MemoryLimitBytes: 256 << 20, CPUMaximum: 5000, CPUAffinity: []compute.CPUGroupAffinity{{Mask: 1}}}
	h.hpcB = f.start(t, "hpc-b", &compute.Settings{Layers: f.basicLayers(t), HostProcess: &compute.HostProcess{}, Resources: limits})
	h.initA, h.initB = startInit(t, h.hpcA), startInit(t, h.hpcB)
	defer h.initA.Close()
	defer h.initB.Close()

	t.Run("MountPointAndEnvironment", h.mountPointAndEnvironment)
	t.Run("HostNetworkAndFiles", h.hostNetworkAndFiles)
	t.Run("ExitCodesAndEvents", h.exitCodesAndEvents)
	t.Run("LaunchErrorsAndUsers", h.launchErrorsAndUsers)
	t.Run("Limits", h.limits)
	t.Run("StopsLikeAJob", h.stopsLikeAJob)
	t.Run("TerminateOneOfTwo", h.terminateOneOfTwo)
	t.Run("OpenAfterCrash", h.openAfterCrash)
	t.Run("HostServerDies", h.hostServerDies)
	t.Run("ConcurrentCreates", h.concurrentCreates)
}

func (h *hostProcessSuite) mountPointAndEnvironment(t *testing.T) {
	r := run(t, h.hpcA, compute.ProcessSettings{
		CommandLine: `probe env CONTAINER_SANDBOX_MOUNT_POINT cwd env PATH env FOO read image.txt read data\in.txt write data\no.txt x write written.txt scratch`,
		User:        systemUser,
		Env:         []string{`Path=C:\tools`, `FOO=%CONTAINER_SANDBOX_MOUNT_POINT%\foo`},
	})
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 8 {
		t.Fatalf("got %+v", r)
	}
	want := []string{
		compute.SandboxMountPointEnv + `=` + h.mpA + `\`,
		h.mpA,
		// PowerShell's and WMI's directories end the spec's PATH, as on
		// Windows (hostprocess.Environment); the prefix's PATH follows.
		`PATH=` + h.mpA + `;C:\tools;C:\windows\System32\WindowsPowerShell\v1.0;C:\windows\System32\Wbem;C:\windows\system32`,
		`FOO=` + h.mpA + `\foo`,
		"from the image",
		"mapped",
		"error:",
		`wrote written.txt`,
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) && !strings.EqualFold(lines[i], w) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.scratchA, layermount.ScratchUpper, "written.txt")); err != nil || string(b) != "scratch" {
		t.Errorf("written.txt in the scratch: %q, %v", b, err)
	}
	// %CONTAINER_SANDBOX_MOUNT_POINT% in the command line, a
	// relative working directory below the mount point, and a full
	// one that is the host's.
	r = run(t, h.hpcA, compute.ProcessSettings{CommandLine: `%CONTAINER_SANDBOX_MOUNT_POINT%\probe.exe cwd read x.txt`, WorkingDirectory: "sub", User: systemUser})
	if !strings.EqualFold(r.stdout, h.mpA+`\sub`+"\nx\n") {
		t.Errorf("relative working directory: %+v", r)
	}
	// The mount point is searched first: a probe.exe on the host's
	// C:\windows\system32 (here pause.exe) loses to the image's.
	shadow := filepath.Join(h.f.b.hostDrive(), "windows", "system32", "probe.exe")
	pause, err := os.ReadFile(h.f.pause)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shadow, pause, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(shadow)
	r = run(t, h.hpcA, compute.ProcessSettings{CommandLine: `probe cwd print first`, WorkingDirectory: `C:\windows`, User: systemUser})
	if !strings.EqualFold(r.stdout, "C:\\windows\nfirst\n") || r.code != 0 {
		t.Errorf("with a probe.exe in system32: %+v", r)
	}
}

func (h *hostProcessSuite) hostNetworkAndFiles(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the host"))
			c.Close()
		}
	}()
	hostFile := filepath.Join(t.TempDir(), "host.txt")
	if err := os.WriteFile(hostFile, []byte("a host file"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, h.hpcA, compute.ProcessSettings{
		CommandLine: fmt.Sprintf(`probe dial %s read "%s" write C:\hpc-shared.txt shared`, l.Addr(), hostPath(hostFile)),
		User:        systemUser,
	})
	if r.stdout != "hello from the host\na host file\nwrote C:\\hpc-shared.txt\n" {
		t.Errorf("got %+v", r)
	}
	// The host's C: is every HostProcess container's.
	r = run(t, h.hpcB, compute.ProcessSettings{CommandLine: `probe read C:\hpc-shared.txt`, User: systemUser})
	if r.stdout != "shared\n" {
		t.Errorf("the other container reads %+v", r)
	}
	if h.hpcA.(*system).prefix != h.hpcB.(*system).prefix {
		t.Errorf("prefixes %s and %s, want the host prefix for both", h.hpcA.(*system).prefix, h.hpcB.(*system).prefix)
	}
}

func (h *hostProcessSuite) exitCodesAndEvents(t *testing.T) {
	ctx := context.Background()
	for _, code := range []uint32{0, 3, 0xC000013A} {
		r := run(t, h.hpcA, compute.ProcessSettings{CommandLine: fmt.Sprintf(`probe exit %d`, code), User: systemUser})
		if uint32(r.code) != code {
			t.Errorf("exit %#x: got %#x", code, r.code)
		}
	}
	var out syncbuffer.Buffer
	p, err := h.hpcA.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `probe wait exit 7`, User: systemUser, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	waitOutput(t, &out, "waiting", p.Wait())
	if err := p.Signal(ctx, compute.CtrlShutdown); err != nil {
		t.Fatal(err)
	}
	waitFor(t, p.Wait(), 10*time.Second, "probe after CtrlShutdown")
	if code, _ := p.ExitCode(); code != 7 || !strings.Contains(out.String(), "interrupted") {
		t.Errorf("after CtrlShutdown: exit %d, output %q", code, out.String())
	}
}

func (h *hostProcessSuite) launchErrorsAndUsers(t *testing.T) {
	ctx := context.Background()
	_, err := h.hpcA.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `nothere.exe --flag`, User: systemUser})
	// Not found, as the HostProcess backend on Windows says
	// (hostprocess.ResolveProgram).
	if !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), `"nothere.exe"`) || !strings.Contains(err.Error(), h.mpA) {
		t.Errorf("a missing program: %v, want not found naming it and the mount point", err)
	}
	for _, user := range []string{"", `NT AUTHORITY\Nobody`} {
		if _, err := h.hpcA.CreateProcess(ctx, &compute.ProcessSettings{CommandLine: `probe`, User: user}); !errdefs.IsInvalidArgument(err) {
			t.Errorf("user %q: %v, want invalid argument", user, err)
		}
	}
	for _, user := range []string{`NT AUTHORITY\Local Service`, `nt authority\NetworkService`, `Users`, `.\builder`} {
		if r := run(t, h.hpcA, compute.ProcessSettings{CommandLine: `probe print ok`, User: user}); r.stdout != "ok\n" {
			t.Errorf("user %q: %+v", user, r)
		}
	}
	st, err := loadState(filepath.Join(h.f.b.root, "hpc-a"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{systemUser, `NT AUTHORITY\LOCAL SERVICE`, `NT AUTHORITY\NETWORK SERVICE`, `Users`, `.\builder`}
	if !slices.Equal(st.HostProcess.Users, want) {
		t.Errorf("recorded users %q, want %q", st.HostProcess.Users, want)
	}
}

func (h *hostProcessSuite) limits(t *testing.T) {
	ctx := context.Background()
	hier := v1Hierarchies()
	if _, ok := hier["memory"]; !ok {
		t.Skip("no memory cgroup controller")
	}
	if _, ok := hier["cpu"]; !ok {
		t.Skip("no cpu cgroup controller")
	}
	r := run(t, h.hpcB, compute.ProcessSettings{CommandLine: `probe alloc 400 print survived`, User: systemUser})
	if r.code == 0 || strings.Contains(r.stdout, "survived") {
		t.Errorf("allocating 400 MiB under a 256 MiB limit: %+v", r)
	}
	p := startSleeper(t, h.hpcB)
	defer func() {
		p.Kill(ctx)
		<-p.Wait()
		p.Close()
	}()
	st := h.hpcB.(*system).st
	cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	for c, path := range st.LimitCgroups {
		rel := strings.TrimPrefix(path, hier[c].mount)
		if !strings.Contains(string(cg), ":"+rel+"\n") {
			t.Errorf("process %d is not in the %s cgroup %s:\n%s", p.Pid(), c, rel, cg)
		}
	}
	if own, _ := ownCgroup(p.Pid()); filepath.Join(h.f.b.cgroups.mount, own) != st.Cgroup {
		t.Errorf("process %d in cgroup %s, want %s", p.Pid(), own, st.Cgroup)
	}
	quota, _ := os.ReadFile(filepath.Join(st.LimitCgroups["cpu"], "cpu.cfs_quota_us"))
	period, _ := os.ReadFile(filepath.Join(st.LimitCgroups["cpu"], "cpu.cfs_period_us"))
	per, _ := strconv.Atoi(strings.TrimSpace(string(period)))
	if strings.TrimSpace(string(quota)) != strconv.Itoa(per*h.f.b.HostCPUs()/2) {
		t.Errorf("CPU quota %q per period %q, want half of %d processors", quota, period, h.f.b.HostCPUs())
	}
	if got := cpusAllowed(t, p.Pid()); got != "0" {
		t.Errorf("process %d runs on CPUs %q, want 0", p.Pid(), got)
	}
	// Update, as a job object's limits.
	if err := h.hpcB.Modify(ctx, compute.Resources{MemoryLimitBytes: 512 << 20}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(st.LimitCgroups["memory"], "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(512<<20) {
		t.Errorf("memory limit after Modify: %q, %v", b, err)
	}
	// A change of one limit leaves the others (a task's update applies
	// one kind at a time): the CPU quota stays after the memory's change,
	// the memory limit after the CPU's.
	if b, _ := os.ReadFile(filepath.Join(st.LimitCgroups["cpu"], "cpu.cfs_quota_us")); strings.TrimSpace(string(b)) != strconv.Itoa(per*h.f.b.HostCPUs()/2) {
		t.Errorf("CPU quota after a memory Modify: %q, want half of %d processors", b, h.f.b.HostCPUs())
	}
	if err := h.hpcB.Modify(ctx, compute.Resources{CPUMaximum: 2500}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(st.LimitCgroups["cpu"], "cpu.cfs_quota_us")); strings.TrimSpace(string(b)) != strconv.Itoa(per*h.f.b.HostCPUs()/4) {
		t.Errorf("CPU quota after a CPU Modify: %q, want a quarter of %d processors", b, h.f.b.HostCPUs())
	}
	if b, err := os.ReadFile(filepath.Join(st.LimitCgroups["memory"], "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(512<<20) {
		t.Errorf("memory limit after a CPU Modify: %q, %v", b, err)
	}
	// A limit below what the silo's processes hold, which the kernel
	// cannot reclaim without swap, is refused as a precondition.
	if swaps, _ := os.ReadFile("/proc/swaps"); strings.Count(string(swaps), "\n") <= 1 {
		if err := h.hpcB.Modify(ctx, compute.Resources{MemoryLimitBytes: 1 << 20}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("a memory limit of 1 MiB under running processes: %v, want FailedPrecondition", err)
		}
	}
}
