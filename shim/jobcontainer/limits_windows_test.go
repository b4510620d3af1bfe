//go:build windows

// The job object's limits on real processes under Wine, with
// jobcontainer_windows_test.go's helpers.

package jobcontainer

import (
	"context"
	"errors"
	"io"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// The job's memory limit is set with kill-on-close; Windows reports it
// back and refuses a commit beyond it. Wine accepts it, but answers the
// query with zeros and does not enforce it.
func TestUnderWineMemoryLimit(t *testing.T) {
	b := realBackend(t)
	sys := container(t, b, &compute.Settings{HostProcess: &compute.HostProcess{InheritUser: true}, Resources: compute.Resources{MemoryLimitBytes: 64 << 20}})
	s := sys.(*system)
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	err := s.withJob(func(job handle) error {
		if r, _, e := syscall.SyscallN(procQryJ.Addr(), uintptr(job), windows.JobObjectExtendedLimitInformation, uintptr(unsafe.Pointer(&info)), unsafe.Sizeof(info), 0); r == 0 {
			return e
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case info.JobMemoryLimit == 64<<20 && info.BasicLimitInformation.LimitFlags == limitKillOnClose|limitJobMemory:
	case isWine() && info.JobMemoryLimit == 0 && info.BasicLimitInformation.LimitFlags == 0:
		t.Log("Wine answers the job's limits with zeros")
	default:
		t.Errorf("job limits: memory %d, flags %#x", info.JobMemoryLimit, info.BasicLimitInformation.LimitFlags)
	}
	if err := sys.Modify(context.Background(), compute.Resources{MemoryLimitBytes: 32 << 20}); err != nil {
		t.Fatal(err)
	}
	var out syncbuffer.Buffer
	p := start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe alloc 128`, Stdout: &out})
	code := waitExit(t, p)
	if code == 3 {
		t.Logf("the commit beyond the limit was refused: %s", out.String())
		return
	}
	if code != 0 || !isWine() {
		t.Errorf("alloc beyond the job's limit: exit %d, %q", code, out.String())
	}
	t.Log("Wine does not enforce the job's memory limit")
}

// The job's commit now, what an update's memory check compares: from
// JobObjectMemoryUsageInformation where the host answers it, else from its
// processes' private bytes; either counts what a process of the job holds.
// Wine answers the class with ERROR_INVALID_PARAMETER (the fallback) and
// gives no process's private bytes.
func TestUnderWineJobCommit(t *testing.T) {
	sys := container(t, realBackend(t), nil)
	s := sys.(*system)
	r, w := io.Pipe()
	start(t, sys, &compute.ProcessSettings{CommandLine: `app.exe alloc 48 hold`, Stdout: w})
	waitLine(t, lines(r), "committed")
	var commit uint64
	var qerr error
	if err := s.withJob(func(job handle) error {
		commit, qerr = s.b.host.jobMemory(job)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	switch f := s.b.host.facts(qerr); {
	case qerr == nil:
		t.Logf("JobObjectMemoryUsageInformation: %d bytes", commit)
	case f.NotSupported || f.InvalidParameter:
		t.Logf("no JobObjectMemoryUsageInformation on this host (%v): the processes' private bytes count", qerr)
	default:
		t.Errorf("JobObjectMemoryUsageInformation = %v", qerr)
	}
	st, err := sys.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case st.Memory.CommitBytes >= 48<<20:
	case isWine() && qerr != nil && st.Memory.CommitBytes == 0:
		// Wine answers neither the class nor another process's private
		// page count: the check against usage is proven on the fake.
		t.Log("Wine reports no commit for the job or its processes")
	default:
		t.Errorf("the job's commit %d bytes while a process of it holds 48 MiB", st.Memory.CommitBytes)
	}
	t.Logf("commit %d bytes, peak %d", st.Memory.CommitBytes, st.Memory.CommitPeakBytes)
}

// isWine reports whether this runs under Wine.
func isWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}

// A CPU limit fails on a host whose job objects lack CPU rate control, as
// Wine's do, naming it; Windows takes it.
func TestUnderWineCPULimit(t *testing.T) {
	b := realBackend(t)
	_, err := b.Create(context.Background(), uniqueID(t), &compute.Settings{
		Layers:      compute.Layers{Scratch: `C:\scratch`, Parents: []string{`C:\base`}},
		HostProcess: &compute.HostProcess{},
		Resources:   compute.Resources{CPUMaximum: 5000},
	})
	if isWine() {
		if !errors.Is(err, compute.ErrNotSupported) || !errors.Is(err, syscall.Errno(87)) {
			t.Errorf("Create with a CPU limit under Wine = %v", err)
		}
		return
	}
	if err != nil {
		t.Errorf("Create with a CPU limit = %v", err)
	}
}
