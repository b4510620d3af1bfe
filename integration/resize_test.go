//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/winproc/winproc/integration/node"
)

// usageRefused is how the shim names the current usage of a refused
// memory limit.
var usageRefused = regexp.MustCompile(`current usage of (\d+) bytes \((\d+\.\d) MiB committed\)`)

// In-place resize through CRI, in both sandbox modes, of an ordinary and
// a HostProcess container: UpdateContainerResources with Windows
// resources, as the kubelet sends it on Windows (KEP-6303), applies CPU,
// memory and affinity live, and crictl inspect shows them; a memory limit
// below what the container holds is refused with FailedPrecondition
// naming both numbers, and the CPU change sent with it is not applied
// either. (crictl update, built for Linux, sends Linux resources only: the
// CRI call is made directly.)
func TestCRIResize(t *testing.T) {
	forEachSandboxer(t, criResize)
}

func criResize(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	importHostProcessImage(t, n)
	rt := criRuntime(t, n)
	resources := map[string]any{"memory_limit_in_bytes": 256 << 20, "cpu_maximum": 5000}
	hold := []string{"alloc", "-mb", "64"}

	pod := runPod(t, n, "resize")
	id := lastLine(crictl(t, n, "create", pod,
		containerConfig(t, "holder", testAppImage, append([]string{testApp}, hold...), map[string]any{"windows": map[string]any{"resources": resources}}),
		podConfig(t, "resize")))
	resizeLive(t, n, rt, id)

	// The same for a HostProcess container, whose limits are its job's.
	hostWindows := hostProcessSecurity(`NT AUTHORITY\SYSTEM`)
	hostWindows["resources"] = resources
	hpPod := runPodWith(t, n, "agents", hostProcessPodConfig(t))
	hp := lastLine(crictl(t, n, "create", hpPod,
		containerConfig(t, "holder", hostProcessImage, append([]string{"winproc-testapp.exe"}, hold...), map[string]any{"windows": hostWindows}),
		hostProcessPodConfig(t)))
	resizeLive(t, n, rt, hp)

	crictl(t, n, "stop", "-t", "10", id, hp)
	crictl(t, n, "rm", id, hp)
	crictl(t, n, "stopp", pod, hpPod)
	crictl(t, n, "rmp", pod, hpPod)
	requireNoPodLeft(t, n, pod)
	requireNoPodLeft(t, n, hpPod)
}

// resizeLive starts container id, which holds 64 MiB under a 256 MiB limit
// and a CPU maximum of 5000, grows its limits through CRI, then asks for a
// memory limit below what it holds with a CPU change, refused whole.
func resizeLive(t *testing.T, n *node.Node, rt runtime.RuntimeServiceClient, id string) {
	t.Helper()
	crictl(t, n, "start", id)
	waitLog(t, n, id, "holding 64 MiB")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	grown := &runtime.WindowsContainerResources{CpuMaximum: 2500, MemoryLimitInBytes: 512 << 20,
		AffinityCpus: []*runtime.WindowsCpuGroupAffinity{{CpuMask: 1, CpuGroup: 0}}}
	if _, err := rt.UpdateContainerResources(ctx, &runtime.UpdateContainerResourcesRequest{ContainerId: id, Windows: grown}); err != nil {
		t.Fatalf("update: %v", err)
	}
	checkResized(t, n, id, 2500, 512<<20)

	// Below the 64 MiB it holds: refused whole.
	shrunk := &runtime.WindowsContainerResources{CpuMaximum: 7500, MemoryLimitInBytes: 16 << 20}
	_, err := rt.UpdateContainerResources(ctx, &runtime.UpdateContainerResourcesRequest{ContainerId: id, Windows: shrunk})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(fmt.Sprint(err), "memory_limit_in_bytes 16777216 (16.0 MiB)") {
		t.Errorf("a limit below the usage: %v; want FailedPrecondition naming 16777216 (16.0 MiB)", err)
	}
	if m := usageRefused.FindStringSubmatch(fmt.Sprint(err)); m == nil {
		t.Errorf("the refusal does not name the usage: %v", err)
	} else if used, _ := strconv.ParseUint(m[1], 10, 64); used < 64<<20 {
		t.Errorf("the usage named is %s bytes; the container holds 64 MiB", m[1])
	}
	checkResized(t, n, id, 2500, 512<<20)
}

// checkResized checks container id's limits where crictl inspect shows
// them (CRI's status) and where the silo enforces them (its cgroups), and
// that it runs on processor 0.
func checkResized(t *testing.T, n *node.Node, id string, cpuMaximum int64, memory int64) {
	t.Helper()
	var inspect struct {
		Status struct {
			Resources struct {
				Windows struct {
					CPUMaximum         int64 `json:"cpuMaximum,string"`
					MemoryLimitInBytes int64 `json:"memoryLimitInBytes,string"`
				}
			}
		}
		Info struct{ Pid int }
	}
	crictlJSON(t, n, &inspect, "inspect", "-o", "json", id)
	if w := inspect.Status.Resources.Windows; w.CPUMaximum != cpuMaximum || w.MemoryLimitInBytes != memory {
		t.Errorf("crictl inspect shows %+v; want cpu_maximum %d, memory %d", w, cpuMaximum, memory)
	}
	var silo struct {
		Resources    struct{ MemoryLimitBytes int64 }
		LimitCgroups map[string]string
	}
	readJSON(t, filepath.Join(n.EmulationRoot(), id, "state.json"), &silo)
	if silo.Resources.MemoryLimitBytes != memory {
		t.Errorf("the silo's memory limit is %d, want %d", silo.Resources.MemoryLimitBytes, memory)
	}
	if path := silo.LimitCgroups["memory"]; path != "" {
		if b, err := os.ReadFile(filepath.Join(path, "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != fmt.Sprint(memory) {
			t.Errorf("the memory cgroup's limit %q (%v), want %d", b, err, memory)
		}
	}
	if path := silo.LimitCgroups["cpu"]; path != "" {
		quota, qerr := os.ReadFile(filepath.Join(path, "cpu.cfs_quota_us"))
		period, perr := os.ReadFile(filepath.Join(path, "cpu.cfs_period_us"))
		p, _ := strconv.ParseInt(strings.TrimSpace(string(period)), 10, 64)
		want := p * int64(goruntime.NumCPU()) * cpuMaximum / 10000
		if qerr != nil || perr != nil || strings.TrimSpace(string(quota)) != fmt.Sprint(want) {
			t.Errorf("the cpu cgroup's quota %q per period %q (%v, %v), want %d", quota, period, qerr, perr, want)
		}
	}
	if inspect.Info.Pid != 0 {
		if got := cpusAllowedList(t, inspect.Info.Pid); got != "0" {
			t.Errorf("the container runs on CPUs %q, want 0", got)
		}
	}
}

// criRuntime is a CRI client of n's containerd, for the calls crictl cannot
// make on Linux.
func criRuntime(t *testing.T, n *node.Node) runtime.RuntimeServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+n.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return runtime.NewRuntimeServiceClient(conn)
}
