//go:build linux

package winenode

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pct is the p-th percentile of d (nearest rank), 0 for none.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(i, 0)]
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// rssOf is the summed resident set (VmRSS) of the Linux processes pids;
// a process gone meanwhile counts nothing.
func rssOf(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				sum += kb << 10
			}
		}
	}
	return sum
}

// shimMemory is a shim's memory: the Linux RSS of its Wine process, and
// the working set Wine reports to Windows programs. Wine 8 reports no
// private bytes of another process (always 0), so they are left out.
type shimMemory struct{ RSS, WorkingSet int64 }

// shimMemory is the memory of shim's processes per pod.
func (n *Node) shimMemory(t *testing.T, shim string, pods int) shimMemory {
	t.Helper()
	out, err := n.Run(InstallDir+`\shimclient.exe`, "mem", shim)
	if err != nil {
		t.Fatalf("shimclient mem %s: %v\n%s", shim, err, out)
	}
	var m shimMemory
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "working_set="); ok {
				b, _ := strconv.ParseInt(v, 10, 64)
				m.WorkingSet += b
			}
		}
	}
	m.RSS = rssOf(n.Processes(shim))
	per := int64(pods)
	return shimMemory{m.RSS / per, m.WorkingSet / per}
}

// peerMetric is one row of the table: a figure of each turn.
type peerMetric struct {
	Name string
	// Value is the figure of a turn, in Unit.
	Value func(peerTurn) float64
	Unit  string
	// Absolute marks a figure whose goal is a value (no growth), not a
	// ratio to runhcs's.
	Absolute bool
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var peerMetrics = []peerMetric{
	{"pod start (runp) p50", func(p peerTurn) float64 { return ms(pct(p.RunP, 50)) }, "ms", false},
	{"pod start (runp) p95", func(p peerTurn) float64 { return ms(pct(p.RunP, 95)) }, "ms", false},
	{"container create p50", func(p peerTurn) float64 { return ms(pct(p.Create, 50)) }, "ms", false},
	{"container start p50", func(p peerTurn) float64 { return ms(pct(p.Start, 50)) }, "ms", false},
	{"create+start p95", func(p peerTurn) float64 { return ms(pct(sums(p.Create, p.Start), 95)) }, "ms", false},
	{"exec -s p50", func(p peerTurn) float64 { return ms(pct(p.Exec, 50)) }, "ms", false},
	{"exec -s p95", func(p peerTurn) float64 { return ms(pct(p.Exec, 95)) }, "ms", false},
	{"container stop p50", func(p peerTurn) float64 { return ms(pct(p.Stop, 50)) }, "ms", false},
	{"container rm p50", func(p peerTurn) float64 { return ms(pct(p.Rm, 50)) }, "ms", false},
	{"pod stop (stopp) p50", func(p peerTurn) float64 { return ms(pct(p.StopP, 50)) }, "ms", false},
	{"pod remove (rmp) p50", func(p peerTurn) float64 { return ms(pct(p.RmP, 50)) }, "ms", false},
	{"shim RSS per pod (Linux)", func(p peerTurn) float64 { return mib(p.PodMemory.RSS) }, "MiB", false},
	{"shim working set per pod (Windows)", func(p peerTurn) float64 { return mib(p.PodMemory.WorkingSet) }, "MiB", false},
	{"shims' RSS growth over the latency probes", func(p peerTurn) float64 { return mib(p.GrowthRSS[1] - p.GrowthRSS[0]) }, "MiB", true},
}

// peerFailed is the row of the exec probes that failed or hung, of all
// rounds.
var peerFailed = peerMetric{"exec probes failed or hung (all rounds)", func(p peerTurn) float64 { return float64(p.FailedProbes) }, "count", true}

// peerGrowth is the row of the growth probes, of the first round alone.
var peerGrowth = peerMetric{"shims' RSS growth over the growth probes (first round)", func(p peerTurn) float64 { return mib(p.GrowthRSS[2] - p.GrowthRSS[1]) }, "MiB", true}

// sums are the pairwise sums of a and b.
func sums(a, b []time.Duration) []time.Duration {
	s := make([]time.Duration, min(len(a), len(b)))
	for i := range s {
		s[i] = a[i] + b[i]
	}
	return s
}

// peerReport is the generated section of docs/peer.md: the run's size and
// machine, each handler's figures (median of the rounds, with their
// range) and winproc's ratios to runhcs, per round paired.
func peerReport(cfg peerConfig, results map[string][]peerTurn, took time.Duration, check string) string {
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "Run: %d rounds of %d pods each, %d exec probes for latency and %d in all for growth; %s; %d CPUs (shared), load %s at the end; %v in all.\n\n",
		cfg.Rounds, cfg.Pods, cfg.Probes, cfg.GrowthProbes, cpuModel(), runtime.NumCPU(), strings.Join(strings.Fields(string(load))[:3], " "), took.Round(time.Second))
	b.WriteString("| metric | winproc (podsandbox) | runhcs (podsandbox) | winproc (shim) | ratio podsandbox/runhcs | ratio shim/runhcs |\n|---|---|---|---|---|---|\n")
	for _, m := range peerMetrics {
		peerRow(&b, m, results)
	}
	first := map[string][]peerTurn{}
	for h, turns := range results {
		first[h] = turns[:1]
	}
	peerRow(&b, peerGrowth, first)
	total := map[string][]peerTurn{}
	for h, turns := range results {
		var sum peerTurn
		for _, t := range turns {
			sum.FailedProbes += t.FailedProbes
		}
		total[h] = []peerTurn{sum}
	}
	peerRow(&b, peerFailed, total)
	fmt.Fprintf(&b, "\nwinproc's image check at a create (`shimclient imagecheck`, medians of 5 processes, ms): %s.\n", check)
	return b.String()
}

// peerRow writes metric m's row of the table.
func peerRow(b *strings.Builder, m peerMetric, results map[string][]peerTurn) {
	fmt.Fprintf(b, "| %s (%s) |", m.Name, m.Unit)
	for _, h := range peerHandlers {
		fmt.Fprintf(b, " %s |", spread(values(results[h.Name], m.Value)))
	}
	for _, h := range []string{"winproc", peerShimHandler} {
		if m.Absolute {
			b.WriteString(" - |")
			continue
		}
		fmt.Fprintf(b, " %s |", ratioSpread(values(results[h], m.Value), values(results[RunhcsHandler], m.Value)))
	}
	b.WriteString("\n")
}

func values(turns []peerTurn, v func(peerTurn) float64) []float64 {
	out := make([]float64, len(turns))
	for i, t := range turns {
		out[i] = v(t)
	}
	return out
}

// spread is the median of v with its range.
func spread(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%.1f (%.1f–%.1f)", s[len(s)/2], s[0], s[len(s)-1])
}

// ratioSpread is the median and range of a[i]/b[i], the rounds paired.
func ratioSpread(a, b []float64) string {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] == 0 {
			return "-"
		}
		r = append(r, a[i]/b[i])
	}
	if len(r) == 0 {
		return "-"
	}
	slices.Sort(r)
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", r[len(r)/2], r[0], r[len(r)-1])
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return "unknown CPU"
}

// The generated section of docs/peer.md lies between these lines.
const (
	peerBegin = "<!-- BEGIN make peer: generated by TestPeer, do not edit -->"
	peerEnd   = "<!-- END make peer -->"
)

// writePeerSection replaces the generated section of the Markdown file
// path with report.
func writePeerSection(path, report string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s for the peer table: %w", path, err)
	}
	before, rest, ok := strings.Cut(string(b), peerBegin)
	_, after, ok2 := strings.Cut(rest, peerEnd)
	if !ok || !ok2 {
		return fmt.Errorf("%s has no section between %q and %q to write the table in", path, peerBegin, peerEnd)
	}
	return os.WriteFile(path, []byte(before+peerBegin+"\n"+report+peerEnd+after), 0o644)
}
