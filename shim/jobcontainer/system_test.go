package jobcontainer

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// startedSystem is a created and started container c1 with no process
// yet.
func startedSystem(t *testing.T) (*Backend, *fakeHost, *system) {
	t.Helper()
	b, f := testBackend(t)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b, f, s.(*system)
}

func run(t *testing.T, s *system, ps *compute.ProcessSettings) compute.Process {
	t.Helper()
	if ps.User == "" {
		ps.User = `NT AUTHORITY\SYSTEM`
	}
	p, err := s.CreateProcess(context.Background(), ps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func exitCode(t *testing.T, p compute.Process) int {
	t.Helper()
	within(t, p.Wait(), "the process's exit")
	code, err := p.ExitCode()
	if err != nil {
		t.Fatal(err)
	}
	return code
}

func TestStart(t *testing.T) {
	b, _ := testBackend(t)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe", User: `NT AUTHORITY\SYSTEM`}); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("CreateProcess before Start = %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("second Start = %v", err)
	}
}

// The process is the program itself: its exit code is the container's,
// whole and unsigned, and the system stops with its last process.
func TestProcessExitCode(t *testing.T) {
	for _, code := range []string{"0", "3", "0xC000013A", "0xC0000005"} {
		t.Run(code, func(t *testing.T) {
			_, f, s := startedSystem(t)
			p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe exit " + code})
			want := map[string]int{"0": 0, "3": 3, "0xC000013A": 0xC000013A, "0xC0000005": 0xC0000005}[code]
			if got := exitCode(t, p); got != want {
				t.Errorf("exit code %#x, want %#x", got, want)
			}
			within(t, s.Wait(), "the system's stop with its last process")
			if err := s.ExitError(); err != nil {
				t.Errorf("ExitError = %v", err)
			}
			names := strings.Join(f.callNames(), " ")
			if !strings.Contains(names, "createProcess assignProcessToJobObject resumeThread") {
				t.Errorf("not suspended, assigned, resumed: %s", names)
			}
		})
	}
}

// What the process gets: the program found in the mount point, its
// command line, the environment, the directory under the mount point, a
// token, and the pipes.
func TestProcessParameters(t *testing.T) {
	_, f, s := startedSystem(t)
	var out syncbuffer.Buffer
	p := run(t, s, &compute.ProcessSettings{
		CommandLine:      `app env`,
		WorkingDirectory: `work`,
		Env:              []string{`A=1`, `PATH=C:\image`},
		Stdout:           &out,
	})
	if code := exitCode(t, p); code != 0 {
		t.Fatalf("exit %d", code)
	}
	got := out.String()
	for _, want := range []string{
		"A=1\n", `CONTAINER_SANDBOX_MOUNT_POINT=C:\hpc\c1\` + "\n", `PATH=C:\hpc\c1;C:\image;`, `USERNAME=shim`,
		`cwd=C:\hpc\c1\work` + "\n", `app=C:\hpc\c1\app.exe` + "\n", "line=app env\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("process saw\n%s\nwithout %q", got, want)
		}
	}
	if !f.isDir(`C:\hpc\c1\work`) {
		t.Error("the working directory under the mount point was not made")
	}
}

func TestProcessStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ps    compute.ProcessSettings
		fail  string
		class func(error) bool
		names []string
	}{
		{"missing program", compute.ProcessSettings{CommandLine: `agent.exe --run`}, "", errdefs.IsNotFound, []string{`"agent.exe"`, `C:\hpc\c1`}},
		{"missing host directory", compute.ProcessSettings{CommandLine: `app.exe`, WorkingDirectory: `D:\nope`}, "", errdefs.IsNotFound, []string{`D:\nope`}},
		{"empty command line", compute.ProcessSettings{CommandLine: ` `}, "", errdefs.IsInvalidArgument, nil},
		{"no user", compute.ProcessSettings{CommandLine: `app.exe`, User: " "}, "", errdefs.IsInvalidArgument, []string{"runAsUserName"}},
		{"command line past CreateProcess's limit", compute.ProcessSettings{CommandLine: `app.exe ` + strings.Repeat("x", 32760)}, "", errdefs.IsInvalidArgument, []string{"command and args", "32768 characters"}},
		{"env value past Windows' limit", compute.ProcessSettings{CommandLine: `app.exe`, Env: []string{"BIG=" + strings.Repeat("x", 32768)}}, "", errdefs.IsInvalidArgument, []string{"env[0] (CRI envs)", `"BIG"`}},
		{"env with a NUL", compute.ProcessSettings{CommandLine: `app.exe`, Env: []string{"A=b\x00"}}, "", errdefs.IsInvalidArgument, []string{"env[0] (CRI envs)", "NUL"}},
		{"CreateProcess fails", compute.ProcessSettings{CommandLine: `app.exe`}, "createProcess", nil, []string{`C:\hpc\c1\app.exe`}},
		{"assignment fails", compute.ProcessSettings{CommandLine: `app.exe sleep`}, "assignProcessToJobObject", errdefs.IsPermissionDenied, []string{"job object"}},
		{"resume fails", compute.ProcessSettings{CommandLine: `app.exe sleep`}, "resumeThread", errdefs.IsPermissionDenied, []string{"resume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, f, s := startedSystem(t)
			if tc.fail != "" {
				f.failNext(tc.fail, errorAccessDenied)
			}
			ps := tc.ps
			if ps.User == "" {
				ps.User = `NT AUTHORITY\SYSTEM`
			}
			_, err := s.CreateProcess(context.Background(), &ps)
			if err == nil || (tc.class != nil && !tc.class(err)) {
				t.Fatalf("CreateProcess = %v", err)
			}
			for _, n := range append(tc.names, "c1") {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("%v does not name %s", err, n)
				}
			}
			f.mu.Lock()
			for _, p := range f.procs {
				if !p.exited {
					t.Errorf("process %d left running", p.pid)
				}
			}
			f.mu.Unlock()
			for _, h := range f.openHandles() {
				if strings.Contains(h, "fakeProc") || strings.Contains(h, "fakeThread") || strings.Contains(h, "fakeEvent") {
					t.Errorf("handle %s left open", h)
				}
			}
		})
	}
}

// Shutdown sends CTRL_SHUTDOWN_EVENT to every process of the job, the
// grandchild too, and the system stops when they have exited; one that
// ignores it is ended by Terminate.
func TestShutdownAndTerminate(t *testing.T) {
	_, f, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe spawn"})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, p); code != 0xC000013A {
		t.Errorf("exit %#x", code)
	}
	events := 0
	for _, c := range f.callList() {
		if c == "ctrlEvent 6" {
			events++
		}
	}
	if events != 2 {
		t.Errorf("%d CTRL_SHUTDOWN_EVENTs, want 2 (the process and its child): %q", events, f.callList())
	}
	notWithin(t, s.Wait(), 50*time.Millisecond, "the stop while the child ignores the event")
	if err := s.Terminate(context.Background()); err != nil {
		t.Fatal(err)
	}
	within(t, s.Wait(), "the stop after Terminate")
	if err := s.ExitError(); err != nil {
		t.Errorf("ExitError = %v", err)
	}
	if err := s.Terminate(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Terminate of a stopped system = %v", err)
	}
	if _, err := s.Stats(context.Background()); !errdefs.IsNotFound(err) {
		t.Errorf("Stats of a stopped system = %v", err)
	}
}

// A system that never ran a process stops at once when asked to.
func TestStopEmpty(t *testing.T) {
	for _, stop := range []string{"shutdown", "terminate"} {
		t.Run(stop, func(t *testing.T) {
			_, _, s := startedSystem(t)
			f := s.Shutdown
			if stop == "terminate" {
				f = s.Terminate
			}
			if err := f(context.Background()); err != nil {
				t.Fatal(err)
			}
			within(t, s.Wait(), "the stop")
		})
	}
}

func TestStatsAndProcessList(t *testing.T) {
	_, _, s := startedSystem(t)
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe spawn"})
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.CPU.TotalRuntimeNS != 4200 || st.CPU.RuntimeUserNS != 3000 || st.Memory.CommitBytes != 2000 ||
		st.Memory.CommitPeakBytes != 1<<20 || st.Memory.PrivateWorkingSetBytes != 4000 || st.Storage.ReadBytes != 4096 ||
		st.ContainerStartTime.IsZero() || st.Uptime < 0 {
		t.Errorf("stats %+v", st)
	}
	list, err := s.ProcessList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Pid != uint32(p.Pid()) || list[0].ImageName != "app.exe" || list[0].MemoryWorkingSetSharedBytes != 1000 {
		t.Errorf("process list %+v", list)
	}
}

func TestModify(t *testing.T) {
	_, f, s := startedSystem(t)
	if err := s.Modify(context.Background(), compute.Resources{MemoryLimitBytes: 1 << 30, CPUCount: 4}); err != nil {
		t.Fatal(err)
	}
	j := f.jobs["winproc-hostprocess-c1"]
	if j.memory != 1<<30 || j.flags != limitKillOnClose|limitJobMemory || j.cpuValue != 5000 {
		t.Errorf("job limits %+v", j)
	}
	if err := s.Modify(context.Background(), compute.Resources{CPUWeight: 100}); err != nil {
		t.Fatal(err)
	}
	if j.memory != 1<<30 || j.cpuFlags != cpuRateEnable|cpuRateWeightBased {
		t.Errorf("a CPU change touched the memory limit: %+v", j)
	}
	if err := s.Modify(context.Background(), compute.Resources{StorageIOPSMaximum: 5}); !errdefs.IsNotImplemented(err) {
		t.Errorf("storage Modify = %v", err)
	}
	f.failNext("setJobAffinity", errorInvalidParameter)
	err := s.Modify(context.Background(), compute.Resources{CPUAffinity: []compute.CPUGroupAffinity{{Mask: 1}}})
	if !errors.Is(err, compute.ErrNotSupported) || !errors.Is(err, errorInvalidParameter) {
		t.Errorf("affinity Modify on a host without it = %v", err)
	}
}

// Close after the stop releases the rootfs, the users and the record;
// before, it keeps them and says so, and the job's processes end with its
// last handle.
func TestClose(t *testing.T) {
	t.Run("after the stop", func(t *testing.T) {
		b, f, s := startedSystem(t)
		p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe exit 0", User: "Users"})
		exitCode(t, p)
		within(t, s.Wait(), "the stop")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if len(f.mounts) != 0 || len(f.users) != 0 {
			t.Errorf("mounts %v, users %v left", f.mounts, f.users)
		}
		if _, ok := b.held(t, "c1"); ok {
			t.Error("record left")
		}
		if h := f.openHandles(); len(h) != 0 {
			t.Errorf("handles left open: %q", h)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
	t.Run("running", func(t *testing.T) {
		b, f, s := startedSystem(t)
		p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
		err := s.Close()
		if !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), `C:\hpc\c1`) {
			t.Fatalf("Close = %v", err)
		}
		if code := exitCode(t, p); code != 0 {
			t.Errorf("exit %d after the job's last handle closed", code)
		}
		if len(f.mounts) != 1 {
			t.Errorf("mounts %v", f.mounts)
		}
		if _, ok := b.held(t, "c1"); !ok {
			t.Error("the record is gone")
		}
		if _, err := s.CreateProcess(context.Background(), &compute.ProcessSettings{CommandLine: "app.exe"}); !errdefs.IsFailedPrecondition(err) {
			t.Errorf("CreateProcess after Close = %v", err)
		}
	})
}

// A lost job (its messages cannot be read) stops the system with
// Unavailable.
func TestWatchLost(t *testing.T) {
	b, f := testBackend(t)
	f.failNext("jobMessage", errorAccessDenied)
	s, err := b.Create(context.Background(), "c1", hostProcessSettings())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	within(t, s.Wait(), "the stop")
	if err := s.ExitError(); !errdefs.IsUnavailable(err) {
		t.Errorf("ExitError = %v", err)
	}
	if err := s.Start(context.Background()); !errdefs.IsUnavailable(err) {
		t.Errorf("Start = %v", err)
	}
}

// Stdin is copied in and closed at its end; output copied out.
func TestProcessStdio(t *testing.T) {
	_, _, s := startedSystem(t)
	var out, errOut syncbuffer.Buffer
	p := run(t, s, &compute.ProcessSettings{CommandLine: "app.exe print hello", Stdin: strings.NewReader("in"), Stdout: &out, Stderr: &errOut})
	exitCode(t, p)
	if out.String() != "hello" {
		t.Errorf("stdout %q", out.String())
	}
}

// A host without I/O accounting for jobs (Wine answers
// ERROR_INVALID_FUNCTION) reports no storage I/O; other failures fail.
func TestStatsWithoutIOAccounting(t *testing.T) {
	_, f, s := startedSystem(t)
	run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	f.failNext("jobIO", errorInvalidFunction, errorAccessDenied)
	st, err := s.Stats(context.Background())
	if err != nil || st.Storage != (compute.StorageStats{}) || st.CPU.TotalRuntimeNS == 0 {
		t.Errorf("Stats = %+v, %v", st, err)
	}
	if _, err := s.Stats(context.Background()); !errdefs.IsPermissionDenied(err) {
		t.Errorf("Stats when the counters fail = %v", err)
	}
}

// The commit Stats reports, which an update's memory check compares, is
// the job's now (JobObjectMemoryUsageInformation, as runhcs reads it), not
// its peak; a host without the class (Wine) gives its processes' private
// bytes; other failures fail.
func TestStatsJobCommit(t *testing.T) {
	_, f, s := startedSystem(t)
	run(t, s, &compute.ProcessSettings{CommandLine: "app.exe ignore"})
	f.jobCommit = 300 << 20
	st, err := s.Stats(context.Background())
	if err != nil || st.Memory.CommitBytes != 300<<20 || st.Memory.CommitPeakBytes != 1<<20 {
		t.Errorf("Stats = %+v, %v; want the job's commit 300 MiB and its peak 1 MiB", st, err)
	}
	f.failNext("jobMemory", errorInvalidParameter, errorAccessDenied)
	if st, err := s.Stats(context.Background()); err != nil || st.Memory.CommitBytes != 1000 {
		t.Errorf("Stats on a host without the class = %+v, %v; want the process's 1000 private bytes", st, err)
	}
	if _, err := s.Stats(context.Background()); !errdefs.IsPermissionDenied(err) {
		t.Errorf("Stats when the job's commit fails = %v", err)
	}
}
