//go:build linux

package integration

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// ScaleEnv sets how many pods TestScale runs; `make bench` sets it.
const ScaleEnv = "WINPROC_SCALE_PODS"

// scaleIdle is how long TestScale watches the node's pods idle.
const scaleIdle = 30 * time.Second

// TestScale starts pods one after another, each with the test app serving
// in it, keeps them all running, and measures what a node with many pods
// costs: runp and container-start latency per tenth of the pods (a start
// must not slow down as pods accumulate), the CPU the shims and the silos'
// Wine processes use over scaleIdle idle seconds (containerd's CRI still
// asks every pod for statistics every second), the shims' average RSS and
// the node's memory per pod, and how long stopping and removing them all
// takes. It fails if the shims together use 2% of a core or more while
// idle, if the last tenth's p50 latencies are over 1.2x the first tenth's,
// or if anything of the pods is left.
func TestScale(t *testing.T) {
	if os.Getenv(ScaleEnv) == "" {
		t.Skipf("%s is not set: run `make bench`", ScaleEnv)
	}
	pods := envInt(t, ScaleEnv, 100)
	n := node.StartWith(t, bins, node.Options{LogLevel: "warn"})
	importPodImages(t, n)
	client := newClient(t, n)
	imageSnapshots := len(ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"))
	available := memAvailable(t)

	tenth := max(pods/10, 1)
	var all []*servingPod
	var runp, start, firstRunp, firstStart durations
	fmt.Printf("%6s %9s %9s %9s %9s\n", "pods", "runp p50", "runp p99", "start p50", "start p99")
	for i := 1; i <= pods && !t.Failed(); i++ {
		p := startServingPod(t, n, client, fmt.Sprintf("scale-%d", i))
		all = append(all, p)
		runp, start = append(runp, p.runp), append(start, p.start)
		if i%tenth == 0 || i == pods {
			fmt.Printf("%6d %9v %9v %9v %9v\n", i, runp.pct(50).Round(time.Millisecond), runp.pct(99).Round(time.Millisecond),
				start.pct(50).Round(time.Millisecond), start.pct(99).Round(time.Millisecond))
			if firstRunp == nil {
				firstRunp, firstStart = runp, start
			}
			if i != pods {
				runp, start = nil, nil
			}
		}
	}
	if t.Failed() {
		return
	}

	shims, wine := n.Shims(), n.WineProcesses()
	if len(shims) != pods {
		t.Errorf("%d shims for %d pods", len(shims), pods)
	}
	time.Sleep(5 * time.Second) // the last pod settles
	daemon := []int{n.ContainerdPID()}
	shimsBefore, wineBefore, daemonBefore := cpuOf(shims), cpuOf(wine), cpuOf(daemon)
	time.Sleep(scaleIdle)
	shimsCPU, wineCPU, daemonCPU := cpuOf(shims)-shimsBefore, cpuOf(wine)-wineBefore, cpuOf(daemon)-daemonBefore
	var rss uint64
	for _, pid := range shims {
		if m, err := node.ProcessMemory(pid); err == nil {
			rss += m.RSS
		}
	}
	var perPod uint64
	if now := memAvailable(t); now < available {
		perPod = (available - now) / uint64(pods)
	}
	share := func(d time.Duration) float64 { return 100 * float64(d) / float64(scaleIdle) }
	fmt.Printf("idle %v: shims %v (%.2f%% of a core), Wine processes (%d) %v (%.2f%% of a core), containerd %v (%.2f%% of a core)\n",
		scaleIdle, shimsCPU, share(shimsCPU), len(wine), wineCPU, share(wineCPU), daemonCPU, share(daemonCPU))
	fmt.Printf("shim RSS %.1f MiB on average; node memory %.1f MiB per pod\n", float64(rss)/float64(len(shims))/mib, float64(perPod)/mib)

	begin := time.Now()
	for _, p := range all {
		stopServingPod(t, n, p)
	}
	fmt.Printf("teardown of %d pods: %v\n", pods, time.Since(begin).Round(time.Millisecond))
	requireNodeClean(t, n, imageSnapshots)

	if share(shimsCPU) >= 2 {
		t.Errorf("%d idle pods' shims used %v in %v, %.2f%% of a core: want under 2%%", pods, shimsCPU, scaleIdle, share(shimsCPU))
	}
	requireFlat(t, 1.2, "runp", firstRunp, runp)
	requireFlat(t, 1.2, "container start", firstStart, start)
}

// memAvailable is the machine's MemAvailable.
func memAvailable(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("/proc/meminfo has no MemAvailable")
	return 0
}
