//go:build linux

package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// SoakEnv sets how many pod cycles TestSoak runs; without it TestSoak
// skips (`make soak` sets it).
const SoakEnv = "WINPROC_SOAK_CYCLES"

// A long run of what a node sees all day: pod after pod through crictl,
// each with a serving container, an exec fed 200 KB on stdin, a burst of
// exec probes, then stop and removal. Every 100 cycles it prints the
// latencies and the daemons' and shims' memory and descriptors. It fails on
// a lost byte, a leak, descriptors of containerd or the snapshotter growing
// by more than 5, or a p50 in the last 100 cycles over 1.5x the first 100's.
func TestSoak(t *testing.T) {
	if os.Getenv(SoakEnv) == "" {
		t.Skipf("%s is not set: run `make soak`", SoakEnv)
	}
	cycles := envInt(t, SoakEnv, 1000)
	const window, probes = 100, 5
	n := node.StartWith(t, bins, node.Options{LogLevel: "warn"})
	importPodImages(t, n)
	client := newClient(t, n)
	imageSnapshots := len(ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"))
	rng := rand.New(rand.NewPCG(3, 4))

	var runp, start durations
	var shimRSS []uint64
	var shimFDs []int
	var first, base nodeUsage
	var firstRunp, firstStart durations
	fmt.Printf("%7s %9s %9s %9s %9s %13s %14s %9s %9s %10s %8s\n",
		"cycles", "runp p50", "runp p99", "start p50", "start p99", "containerd", "snapshotter", "cd fds", "snap fds", "shim RSS", "shim fds")
	for i := 1; i <= cycles && !t.Failed(); i++ {
		p := startServingPod(t, n, client, fmt.Sprintf("soak-%d", i))
		runp, start = append(runp, p.runp), append(start, p.start)
		p.serves(t)

		payload := make([]byte, 200_000)
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		if got, code := execEcho(t, p.task, "stdin", payload, i%2 == 0); code != 0 || string(got) != string(payload) {
			t.Errorf("cycle %d: exec with stdin: exit %d, %d of %d bytes back", i, code, len(got), len(payload))
		}
		for j := range probes {
			execProbe(t, p.task, fmt.Sprintf("probe-%d", j))
		}
		if shims := n.Shims(); len(shims) == 1 {
			if m, err := node.ProcessMemory(shims[0]); err == nil {
				shimRSS = append(shimRSS, m.RSS)
			}
			shimFDs = append(shimFDs, countFDs(t, shims[0]))
		} else {
			t.Errorf("cycle %d: shims %v, want the pod's one", i, shims)
		}
		stopServingPod(t, n, p)

		if i%window == 0 || i == cycles {
			u := readNodeUsage(t, n)
			if i == window || (i == cycles && i < window) {
				first, firstRunp, firstStart = u, runp, start
			}
			if base == (nodeUsage{}) {
				base = u
			}
			fmt.Printf("%7d %9v %9v %9v %9v %10.1f MiB %11.1f MiB %9d %9d %6.1f MiB %8d\n", i,
				runp.pct(50).Round(time.Millisecond), runp.pct(99).Round(time.Millisecond),
				start.pct(50).Round(time.Millisecond), start.pct(99).Round(time.Millisecond),
				float64(u.containerdRSS)/mib, float64(u.snapshotterRSS)/mib, u.containerdFDs, u.snapshotterFDs,
				float64(mean(shimRSS))/mib, int(mean(shimFDs)))
			if i != cycles {
				runp, start, shimRSS, shimFDs = nil, nil, nil, nil
			}
		}
	}
	last := readNodeUsage(t, n)
	if d := last.containerdFDs - first.containerdFDs; d > 5 {
		t.Errorf("containerd's descriptors grew by %d (from %d after the first %d cycles)", d, first.containerdFDs, window)
	}
	if d := last.snapshotterFDs - first.snapshotterFDs; d > 5 {
		t.Errorf("the snapshotter's descriptors grew by %d (from %d after the first %d cycles)", d, first.snapshotterFDs, window)
	}
	requireFlat(t, 1.5, "runp", firstRunp, runp)
	requireFlat(t, 1.5, "container start", firstStart, start)
	requireNodeClean(t, n, imageSnapshots)
}

func mean[T int | uint64](v []T) T {
	if len(v) == 0 {
		return 0
	}
	var sum T
	for _, x := range v {
		sum += x
	}
	return sum / T(len(v))
}
