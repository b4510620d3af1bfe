//go:build linux

package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	tasktypes "github.com/containerd/containerd/api/types/task"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/shim/options"
)

// The benchmarks measure a running system once per invocation, whatever
// b.N: `make bench` runs them with -benchtime 1x. Their figures are
// reported as metrics; ns/op, the time of the whole setup, is suppressed.
// Benchmark output shows at most 10 log lines without -v: each benchmark
// logs fewer.

// benchNamespace is the namespace of the shims BenchmarkShimRSS starts
// itself: none of containerd's.
const benchNamespace = "winproc-bench"

const (
	// rssSettle is how long a shim runs after it first answers (or its
	// pod's app reports ready) before its memory is read. Idle shims of
	// both kinds are flat from there on (pkg/shim's FreeOSMemory every
	// 30 s moves either by less than 0.5 MiB).
	rssSettle = 3 * time.Second
	// rssReadings are taken 200 ms apart after rssSettle; their median
	// counts.
	rssReadings = 5
	// rssRounds alternate the two idle shims; the median round counts.
	rssRounds = 3
)

const mib = 1 << 20

// BenchmarkShimRSS compares the resident memory of our shim per pod with
// containerd's own containerd-shim-runc-v2 of the pinned containerd.
//
// Like for like (idle): each binary's serving process is started directly,
// as containerd and the binary's own shim manager start it (see
// node.StartShim: args, environment, bundle, socket on fd 3), waited for
// until it answers the task API's Connect, given rssSettle, and measured:
// VmRSS and Pss. No runc is needed: neither shim holds a task. Besides,
// our shim is measured as it really serves a pod: one test-app container
// started through containerd.
func BenchmarkShimRSS(b *testing.B) {
	n := node.Start(b, bins)
	runcShim := filepath.Join(n.Tools, "containerd-shim-runc-v2")
	ourShim := filepath.Join(bins, "containerd-shim-winproc-v2")
	if _, err := os.Stat(runcShim); err != nil {
		b.Fatalf("containerd's runc shim, the yardstick: %v (`make tools` builds it)", err)
	}
	body, err := toml.Marshal(n.RuntimeOptions())
	if err != nil {
		b.Fatal(err)
	}

	// Registered before any shim is started, this runs after their own
	// cleanups, pass or fail: no shim started here outlives the benchmark.
	var started []*node.ShimProcess
	b.Cleanup(func() {
		for _, s := range started {
			if err := s.Gone(); err != nil {
				b.Error(err)
			}
			if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
				b.Errorf("%s left behind (%v)", s.Dir, err)
			}
		}
	})
	idle := func(binary, id string, env ...string) node.Memory {
		s := n.StartShim(b, binary, benchNamespace, id, env...)
		started = append(started, s)
		m := settledMemory(b, s.Pid)
		s.Stop(b)
		if err := s.Gone(); err != nil {
			b.Fatal(err)
		}
		return m
	}
	var runcRounds, ourRounds []node.Memory
	for i := range rssRounds {
		// What each binary's shim manager adds to containerd's
		// environment: runc's sets GOMAXPROCS=4 (and names its traces),
		// ours GOMAXPROCS=2 and passes the runtime options.
		runcRounds = append(runcRounds, idle(runcShim, fmt.Sprintf("idle-runc-%d", i),
			"GOMAXPROCS=4", fmt.Sprintf("OTEL_SERVICE_NAME=containerd-shim-idle-runc-%d", i)))
		ourRounds = append(ourRounds, idle(ourShim, fmt.Sprintf("idle-winproc-%d", i),
			"GOMAXPROCS=2", options.Env+"="+string(body)))
	}
	runc, ours := medianMemory(runcRounds), medianMemory(ourRounds)

	// Our shim serving a pod for real: containerd starts it.
	importTestApp(b, n)
	client := newClient(b, n)
	_, out := startTestApp(b, n, client, "rss-pod", "sleep", "-seconds", "0")
	out.waitFor(b, "ready")
	shims := n.Shims()
	if len(shims) != 1 {
		b.Fatalf("shims of this node: %v, want 1", shims)
	}
	pod := settledMemory(b, shims[0])
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", shims[0]))
	if err != nil {
		b.Fatal(err)
	}
	podFlags := "without -debug"
	if strings.Contains(string(cmdline), "\x00-debug\x00") { // arguments end in NUL
		podFlags = "with -debug (containerd logs at debug level)"
	}

	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ratio(ours.RSS, runc.RSS), "idle-rss-ratio")
	b.ReportMetric(ratio(ours.PSS, runc.PSS), "idle-pss-ratio")
	b.ReportMetric(float64(runc.RSS)/mib, "runc-idle-rss-MiB")
	b.ReportMetric(float64(ours.RSS)/mib, "ours-idle-rss-MiB")
	b.ReportMetric(float64(pod.RSS)/mib, "ours-pod-rss-MiB")
	b.ReportMetric(ratio(pod.RSS, runc.RSS), "pod-rss-ratio")

	b.Logf("measured: VmRSS (/proc/PID/status) and Pss (/proc/PID/smaps_rollup), median of %d readings 200 ms apart taken %v after the shim first answered; ratio = ours/runc", rssReadings, rssSettle)
	b.Logf("idle (like for like): each serving process started directly as containerd and its shim manager start it: `-namespace %s -id ID -address <containerd.sock>`, cwd a bundle with config.json and the log fifo, TTRPC_ADDRESS/GRPC_ADDRESS/NAMESPACE/MAX_SHIM_VERSION, runc GOMAXPROCS=4, ours GOMAXPROCS=2 + runtime options, listening socket as fd 3, no -debug; up when task v3 Connect answers with its PID; %d rounds alternating, median round", benchNamespace, rssRounds)
	b.Logf("runc idle: RSS %s, PSS %s (rounds RSS %s)", mibs(runc.RSS), mibs(runc.PSS), roundsRSS(runcRounds))
	b.Logf("ours idle: RSS %s, PSS %s (rounds RSS %s) -> RSS ratio %.3f, PSS ratio %.3f", mibs(ours.RSS), mibs(ours.PSS), roundsRSS(ourRounds), ratio(ours.RSS, runc.RSS), ratio(ours.PSS, runc.PSS))
	b.Logf("ours serving one pod (a running test-app container started through containerd; shim PID %d from Node.Shims, %s): RSS %s, PSS %s -> %.3f x runc idle", shims[0], podFlags, mibs(pod.RSS), mibs(pod.PSS), ratio(pod.RSS, runc.RSS))
	b.Logf("shims started directly (%d): each stopped with task Shutdown, reaped, no process with its command line, socket removed", len(started))
}

// settledMemory waits rssSettle, then reads pid's memory rssReadings times
// and returns the median.
func settledMemory(b *testing.B, pid int) node.Memory {
	b.Helper()
	time.Sleep(rssSettle)
	var readings []node.Memory
	for i := range rssReadings {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		m, err := node.ProcessMemory(pid)
		if err != nil {
			b.Fatal(err)
		}
		readings = append(readings, m)
	}
	return medianMemory(readings)
}

// medianMemory is the median RSS and the median PSS of readings.
func medianMemory(readings []node.Memory) node.Memory {
	var rss, pss []uint64
	for _, r := range readings {
		rss, pss = append(rss, r.RSS), append(pss, r.PSS)
	}
	slices.Sort(rss)
	slices.Sort(pss)
	return node.Memory{RSS: rss[len(rss)/2], PSS: pss[len(pss)/2]}
}

func ratio(a, b uint64) float64 { return float64(a) / float64(b) }

func mibs(v uint64) string { return fmt.Sprintf("%.2f MiB", float64(v)/mib) }

func roundsRSS(rounds []node.Memory) string {
	var s []string
	for _, r := range rounds {
		s = append(s, fmt.Sprintf("%d", r.RSS>>10))
	}
	return strings.Join(s, "/") + " KiB"
}

// latencyRounds is how many times each call is timed.
const latencyRounds = 1000

// BenchmarkTaskAPILatency compares the round trip of the task API's State
// and Pids through containerd (the Go client's Task.Status and Task.Pids:
// gRPC to containerd, which calls the shim over ttrpc) with the same calls
// made directly on the shim's socket (task v3 over ttrpc, the namespace in
// the ttrpc metadata), on a running test-app container.
func BenchmarkTaskAPILatency(b *testing.B) {
	n := node.Start(b, bins)
	importTestApp(b, n)
	client := newClient(b, n)
	const id = "latency"
	task, out := startTestApp(b, n, client, id, "sleep", "-seconds", "0")
	out.waitFor(b, "ready")

	ctx := context.Background()
	socket, err := n.ShimSocket(id)
	if err != nil {
		b.Fatal(err)
	}
	direct, err := node.DialTask(ctx, socket)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { direct.Close() })
	dctx := namespaces.WithNamespace(ctx, node.Namespace)

	// Both paths see the same running task.
	status, err := task.Status(ctx)
	if err != nil || status.Status != containerd.Running {
		b.Fatalf("through containerd the task is %v, %v; want running", status.Status, err)
	}
	state, err := direct.State(dctx, &taskv3.StateRequest{ID: id})
	if err != nil {
		b.Fatal(err)
	}
	if state.Status != tasktypes.Status_RUNNING || state.Pid != task.Pid() {
		b.Fatalf("directly the task is %v with PID %d; want running with PID %d", state.Status, state.Pid, task.Pid())
	}
	pids, err := task.Pids(ctx)
	if err != nil {
		b.Fatal(err)
	}
	directPids, err := direct.Pids(dctx, &taskv3.PidsRequest{ID: id})
	if err != nil {
		b.Fatal(err)
	}
	if len(pids) == 0 || len(pids) != len(directPids.Processes) {
		b.Fatalf("Pids: %d processes through containerd, %d directly", len(pids), len(directPids.Processes))
	}

	calls := []struct {
		name string
		call func() error
	}{
		{"state-containerd", func() error { _, err := task.Status(ctx); return err }},
		{"state-direct", func() error { _, err := direct.State(dctx, &taskv3.StateRequest{ID: id}); return err }},
		{"pids-containerd", func() error { _, err := task.Pids(ctx); return err }},
		{"pids-direct", func() error { _, err := direct.Pids(dctx, &taskv3.PidsRequest{ID: id}); return err }},
	}
	samples := make([][]time.Duration, len(calls))
	// Warm up connections and caches, then take the calls in turn, so
	// that drift and noise fall on every path alike.
	for round := range latencyRounds / 10 {
		for i, c := range calls {
			if err := c.call(); err != nil {
				b.Fatalf("%s (warm-up %d): %v", calls[i].name, round, err)
			}
		}
	}
	b.ResetTimer()
	for range latencyRounds {
		for i, c := range calls {
			start := time.Now()
			err := c.call()
			d := time.Since(start)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	b.StopTimer()

	p50, p99 := make([]time.Duration, len(calls)), make([]time.Duration, len(calls))
	for i := range calls {
		slices.Sort(samples[i])
		p50[i], p99[i] = percentile(samples[i], 50), percentile(samples[i], 99)
		b.ReportMetric(float64(p50[i].Nanoseconds())/1e3, calls[i].name+"-p50-us")
		b.ReportMetric(float64(p99[i].Nanoseconds())/1e3, calls[i].name+"-p99-us")
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(p50[0])/float64(p50[1]), "state-p50-ratio")
	b.ReportMetric(float64(p99[0])/float64(p99[1]), "state-p99-ratio")
	b.ReportMetric(float64(p50[2])/float64(p50[3]), "pids-p50-ratio")
	b.ReportMetric(float64(p99[2])/float64(p99[3]), "pids-p99-ratio")

	b.Logf("measured: %d rounds after %d warm-up rounds, each round timing State and Pids once per path in turn on running task %q (PID %d, %d processes); median and p99 (nearest rank); ratio = through containerd / direct", latencyRounds, latencyRounds/10, id, task.Pid(), len(pids))
	b.Logf("through containerd: Go client Task.Status (tasks.Get) and Task.Pids (tasks.ListPids), gRPC to containerd, which calls the shim over ttrpc; direct: task v3 TTRPCTaskClient on the shim's socket %s (from bootstrap.json), namespace %s in the ttrpc metadata", socket, node.Namespace)
	for i := 0; i < len(calls); i += 2 {
		b.Logf("%-5s containerd p50 %v p99 %v | direct p50 %v p99 %v | ratio p50 %.2f p99 %.2f",
			strings.TrimSuffix(calls[i].name, "-containerd"), p50[i], p99[i], p50[i+1], p99[i+1],
			float64(p50[i])/float64(p50[i+1]), float64(p99[i])/float64(p99[i+1]))
	}
}

// percentile is the nearest-rank percentile p of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
