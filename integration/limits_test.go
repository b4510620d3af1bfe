//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/integration/node"
)

// burnedCPU reads the CPU time `winproc-testapp burn` reports.
var burnedCPU = regexp.MustCompile(`burned cpu=(\S+)`)

// A container's limits hold as a job object's would (shim/emulation's
// limits_linux.go): an allocation past the memory limit fails, and the CPU
// a container burns stays within its maximum. Set through crictl create,
// and changed live through the task API's Update, with the Windows
// resources containerd's Windows CRI sends (TestCRIResize goes through
// CRI).
func TestCRIResourceLimits(t *testing.T) {
	n := node.Start(t, bins)
	importPodImages(t, n)
	pod := runPod(t, n, "limits")
	podCfg := podConfig(t, "limits")
	const memLimit = 256 << 20
	limited := func(name string, args []string, resources map[string]any) string {
		t.Helper()
		id := lastLine(crictl(t, n, "create", pod,
			containerConfig(t, name, testAppImage, append([]string{testApp}, args...), map[string]any{"windows": map[string]any{"resources": resources}}), podCfg))
		crictl(t, n, "start", id)
		return id
	}

	// Memory: within the limit the allocation holds; past it, it fails
	// and the Go runtime says so, as it would under a job's commit limit.
	within := limited("mem-within", []string{"alloc", "-mb", "32"}, map[string]any{"memory_limit_in_bytes": memLimit})
	past := limited("mem-past", []string{"alloc", "-mb", "400"}, map[string]any{"memory_limit_in_bytes": memLimit})
	waitLog(t, n, within, "holding 32 MiB")
	if code := waitExited(t, n, past); code == 0 {
		t.Errorf("allocating past the limit exited 0")
	}
	// (On Windows VirtualAlloc fails with ERROR_COMMITMENT_LIMIT; Wine
	// reports another code.)
	if out := crictl(t, n, "logs", past); strings.Contains(out, "holding") || !strings.Contains(out, "VirtualAlloc") || !strings.Contains(out, "fatal error") {
		t.Errorf("allocating 400 MiB under a 256 MiB limit; the log:\n%s", out)
	}

	// CPU: a maximum of a quarter of the host's processors, burning one
	// processor's worth for 3 s.
	const burn = 3 * time.Second
	capped := limited("cpu-capped", []string{"burn", "-seconds", "3"}, map[string]any{"cpu_maximum": 2500})
	waitLog(t, n, capped, "burned cpu=")
	share := min(1, 0.25*float64(runtime.NumCPU()))
	used := burned(t, crictl(t, n, "logs", capped))
	if want := time.Duration(share * float64(burn)); used > want*13/10 || used < want/2 {
		t.Errorf("burned %v of CPU in %v under a %.0f%% cap; want about %v", used, burn, share*100, want)
	}
	t.Logf("CPU maximum 25%% of %d processors: %v of CPU in %v", runtime.NumCPU(), used, burn)

	client := newClient(t, n)
	cgroups := checkMemoryUpdate(t, n, client, within)

	// CPU affinity, as the Windows CRI passes Kubernetes' (affinity_cpus),
	// then moved live through Update: the app runs on those processors.
	pinned := limited("pinned", []string{"serve", "-addr", "127.0.0.1:0"}, map[string]any{"affinity_cpus": []map[string]any{{"cpu_mask": 1, "cpu_group": 0}}})
	waitLog(t, n, pinned, "listening on")
	checkAffinityUpdate(t, client, pinned)

	crictl(t, n, "stop", "-t", "10", within, capped, pinned)
	crictl(t, n, "rm", within, past, capped, pinned)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	requireNoPodLeft(t, n, pod)
	for _, path := range cgroups {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("the silo's cgroup %s is left", path)
		}
	}
}

// checkMemoryUpdate changes container id's memory limit live, through the
// task API as containerd's Windows CRI makes it, and returns the silo's
// limit cgroups.
func checkMemoryUpdate(t *testing.T, n *node.Node, client *containerd.Client, id string) map[string]string {
	t.Helper()
	ctx := context.Background()
	c, err := client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	newLimit := uint64(512 << 20)
	if err := task.Update(ctx, containerd.WithResources(&specs.WindowsResources{Memory: &specs.WindowsMemoryResources{Limit: &newLimit}})); err != nil {
		t.Fatalf("update the memory limit: %v", err)
	}
	var silo struct {
		Resources    struct{ MemoryLimitBytes uint64 }
		LimitCgroups map[string]string
	}
	readJSON(t, filepath.Join(n.EmulationRoot(), id, "state.json"), &silo)
	b, err := os.ReadFile(filepath.Join(silo.LimitCgroups["memory"], "memory.limit_in_bytes"))
	if err != nil || silo.Resources.MemoryLimitBytes != newLimit || strings.TrimSpace(string(b)) != fmt.Sprint(newLimit) {
		t.Errorf("after the update: recorded %d, the memory cgroup's limit %q (%v); want %d", silo.Resources.MemoryLimitBytes, b, err, newLimit)
	}
	// The app's own commit limit follows.
	if limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", task.Pid())); err != nil || !regexp.MustCompile(`Max data size\s+`+fmt.Sprint(newLimit)+`\s`).Match(limits) {
		t.Errorf("the app's limits after the update (%v):\n%s", err, limits)
	}
	return silo.LimitCgroups
}

// checkAffinityUpdate checks that container id runs on processor 0, as its
// config asked, then moves it live through Update to the last processor.
func checkAffinityUpdate(t *testing.T, client *containerd.Client, id string) {
	t.Helper()
	ctx := context.Background()
	pc, err := client.LoadContainer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ptask, err := pc.Task(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cpusAllowedList(t, int(ptask.Pid())); got != "0" {
		t.Errorf("the pinned app runs on CPUs %q, want 0", got)
	}
	last := runtime.NumCPU() - 1
	if err := ptask.Update(ctx, containerd.WithResources(&specs.WindowsResources{CPU: &specs.WindowsCPUResources{Affinity: []specs.WindowsCPUGroupAffinity{{Mask: 1 << last}}}})); err != nil {
		t.Fatalf("update the affinity: %v", err)
	}
	if got := cpusAllowedList(t, int(ptask.Pid())); got != fmt.Sprint(last) {
		t.Errorf("after the update the app runs on CPUs %q, want %d", got, last)
	}
}

// cpusAllowedList is the processors the main thread of process pid may
// run on, from /proc.
func cpusAllowedList(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no Cpus_allowed_list in the status of process %d", pid)
	return ""
}

// burned is the CPU time in a burn's log.
func burned(t *testing.T, log string) time.Duration {
	t.Helper()
	m := burnedCPU.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no burned CPU in the log:\n%s", log)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return d
}
