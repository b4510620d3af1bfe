//go:build linux

package winenode

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The peer run (`make peer`, docs/peer.md): winproc and the incumbent,
// containerd-shim-runhcs-v1.exe, on one Windows node under Wine, through
// the same stand-ins, the same images and containerd.exe's CRI at one log
// level, in alternating rounds. Each handler's turn of a round runs pods
// one after another, a container in each, exec probes in the first, then
// stops and removes everything, timing every crictl.exe call and reading
// the shims' memory.

// peerHandler is one runtime handler of the comparison.
type peerHandler struct {
	// Name is the CRI runtime handler; Label names it in the table.
	Name, Label string
	// Shim is the shim's executable name, whose processes are measured.
	Shim string
}

// peerHandlers are winproc in both sandbox modes and runhcs in the one it
// has (containerd's podsandbox).
var peerHandlers = []peerHandler{
	{Name: "winproc", Label: "winproc (podsandbox)", Shim: "containerd-shim-winproc-v2.exe"},
	{Name: RunhcsHandler, Label: "runhcs (podsandbox)", Shim: RunhcsShim},
	{Name: peerShimHandler, Label: "winproc (shim)", Shim: "containerd-shim-winproc-v2.exe"},
}

// peerShimHandler is winproc's shim-mode handler on the peer node.
const peerShimHandler = "winproc-shim"

// peerConfig is the run's size, from the environment (`make peer`'s
// variables), the by default.
type peerConfig struct {
	Rounds, Pods, Probes, GrowthProbes int
	// Out is the Markdown file whose generated section the run writes.
	Out string
	// LogLevel is containerd.exe's and the shims' (info by default);
	// ContainerdLog, if set, is where containerd.exe's log is written at
	// the end, for tracing a slow call.
	LogLevel, ContainerdLog string
}

func peerConfigFromEnv(t *testing.T) peerConfig {
	c := peerConfig{Rounds: 3, Pods: 30, Probes: 200, GrowthProbes: 500, Out: os.Getenv("WINPROC_PEER_OUT"),
		LogLevel: cmp.Or(os.Getenv("WINPROC_PEER_LOG_LEVEL"), "info"), ContainerdLog: os.Getenv("WINPROC_PEER_CONTAINERD_LOG")}
	for env, v := range map[string]*int{"WINPROC_PEER_ROUNDS": &c.Rounds, "WINPROC_PEER_PODS": &c.Pods, "WINPROC_PEER_PROBES": &c.Probes, "WINPROC_PEER_GROWTH_PROBES": &c.GrowthProbes} {
		if s := os.Getenv(env); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive count", env, s)
			}
			*v = n
		}
	}
	if c.GrowthProbes < c.Probes {
		t.Fatalf("WINPROC_PEER_GROWTH_PROBES (%d) must be at least WINPROC_PEER_PROBES (%d): the latency probes are its first", c.GrowthProbes, c.Probes)
	}
	return c
}

func TestPeer(t *testing.T) {
	if os.Getenv("WINPROC_PEER") == "" {
		t.Skip("WINPROC_PEER is not set; run through `make peer`")
	}
	cfg := peerConfigFromEnv(t)
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "podsandbox", Runhcs: true, ShimModeHandler: peerShimHandler, LogLevel: cfg.LogLevel})
	if cfg.ContainerdLog != "" {
		t.Cleanup(func() {
			if err := os.WriteFile(cfg.ContainerdLog, []byte(n.ContainerdLog()), 0o644); err != nil {
				t.Error(err)
			}
		})
	}
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	check := peerImageCheck(t, n)
	results := map[string][]peerTurn{}
	start := time.Now()
	for r := 0; r < cfg.Rounds; r++ {
		// Each round starts with the next handler, so none is always
		// first on a fresh node or last on a tired one.
		for i := range peerHandlers {
			h := peerHandlers[(r+i)%len(peerHandlers)]
			turn := peerRun(t, n, h, cfg, r)
			t.Logf("round %d %s: %s", r+1, h.Label, turn)
			results[h.Name] = append(results[h.Name], turn)
		}
	}
	report := peerReport(cfg, results, time.Since(start), check)
	t.Logf("\n%s", report)
	if cfg.Out != "" {
		if err := writePeerSection(cfg.Out, report); err != nil {
			t.Fatal(err)
		}
	}
}

// peerImageCheck times winproc's image check, the part of a create runhcs
// does not have, on a container record of the app image: in 5 processes,
// each on a connection its first call makes, on one made before, and 20
// times more on that one. It returns the medians.
func peerImageCheck(t *testing.T, n *Node) string {
	t.Helper()
	ctr(t, n, "-n", "k8s.io", "containers", "create", "--snapshotter", "windowsfilter", appImage, "peer-imagecheck")
	// Removed with its snapshot before the turns, which check that each
	// leaves nothing.
	defer ctr(t, n, "-n", "k8s.io", "containers", "rm", "peer-imagecheck")
	times := map[string][]float64{}
	for range 5 {
		out, err := n.Run(InstallDir+`\shimclient.exe`, "imagecheck", `\\.\pipe\containerd-containerd`, "k8s.io", "peer-imagecheck", "20")
		if err != nil {
			t.Fatalf("image check: %v\n%s", err, out)
		}
		for _, f := range strings.Fields(out) {
			k, v, ok := strings.Cut(f, "=")
			if ms, err := strconv.ParseFloat(v, 64); ok && err == nil {
				times[k] = append(times[k], ms)
			}
		}
	}
	med := func(k string) float64 {
		v := times[k]
		if len(v) == 0 {
			t.Fatalf("image check printed no %s=", k)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return fmt.Sprintf("%.1f on a connection its call makes (the shim's first create before it connected at start), %.1f on one made before (its first create now), %.1f later",
		med("first"), med("connected"), med("then"))
}

// peerTurn is what one handler's turn of a round measured.
type peerTurn struct {
	RunP, Create, Start, Exec, Stop, Rm, StopP, RmP []time.Duration
	// PodMemory is the handler's shims' memory per pod with every pod's
	// container running.
	PodMemory shimMemory
	// FailedProbes counts the exec probes that failed or hung past
	// probeTimeout.
	FailedProbes int
	// GrowthRSS is the shims' summed RSS before the exec probes, after
	// the latency probes and after the growth probes (the first round's;
	// the others run the latency probes only).
	GrowthRSS [3]int64
}

func (p peerTurn) String() string {
	return fmt.Sprintf("runp p50 %v, create p50 %v, start p50 %v, exec p50 %v p95 %v, %.1f MiB RSS per pod, shims' RSS %.1f -> %.1f -> %.1f MiB over the probes",
		pct(p.RunP, 50), pct(p.Create, 50), pct(p.Start, 50), pct(p.Exec, 50), pct(p.Exec, 95), mib(p.PodMemory.RSS), mib(p.GrowthRSS[0]), mib(p.GrowthRSS[1]), mib(p.GrowthRSS[2]))
}

// peerRun is handler h's turn of round r: cfg.Pods pods one after
// another, then a container in each, the probes in the first, and the
// teardown; nothing is left.
func peerRun(t *testing.T, n *Node, h peerHandler, cfg peerConfig, r int) peerTurn {
	var turn peerTurn
	pods := make([]string, cfg.Pods)
	configs := make([]string, cfg.Pods)
	for i := range pods {
		name := fmt.Sprintf("%s-r%d-p%d", strings.ReplaceAll(h.Name, "-", ""), r, i)
		configs[i] = criJSON(t, name+".json", map[string]any{
			"metadata": map[string]any{"name": name, "namespace": "peer", "uid": "uid-" + name},
			"hostname": name,
		})
		pods[i] = timed(t, n, &turn.RunP, "runp", "--runtime", h.Name, configs[i])
	}
	ctrs := make([]string, cfg.Pods)
	for i, pod := range pods {
		c := criJSON(t, fmt.Sprintf("ctr-%d.json", i), map[string]any{
			"metadata": map[string]any{"name": "app"},
			"image":    map[string]any{"image": appImage},
			"command":  []string{`C:\winproc-testapp.exe`, "sleep", "-seconds", "3600"},
		})
		ctrs[i] = timed(t, n, &turn.Create, "create", pod, c, configs[i])
		timed(t, n, &turn.Start, "start", ctrs[i])
	}
	shims := n.Processes(h.Shim)
	if len(shims) != cfg.Pods {
		t.Errorf("%s: %d shims for %d pods, want one a pod", h.Label, len(shims), cfg.Pods)
	}
	turn.PodMemory = n.shimMemory(t, h.Shim, cfg.Pods)

	// The growth probes, beyond the latency probes, run in the first
	// round only: they are a leak check, and the longest part of a turn.
	probes := cfg.Probes
	if r == 0 {
		probes = cfg.GrowthProbes
	}
	turn.GrowthRSS[0] = rssOf(shims)
	for i := 0; i < probes; i++ {
		if i < cfg.Probes {
			turn.Exec = append(turn.Exec, 0)
		}
		if d, err := n.probe(ctrs[0]); err != nil {
			// A probe that fails or hangs is counted, not timed: the
			// run goes on, as a kubelet's next probe would.
			t.Logf("%s: exec probe %d: %v", h.Label, i+1, err)
			turn.FailedProbes++
		} else if i < cfg.Probes {
			turn.Exec[i] = d
		}
		if i+1 == cfg.Probes {
			turn.GrowthRSS[1] = rssOf(shims)
		}
	}
	turn.GrowthRSS[2] = rssOf(shims)
	turn.Exec = slices.DeleteFunc(turn.Exec, func(d time.Duration) bool { return d == 0 })
	if after := n.Processes(h.Shim); !slices.Equal(after, shims) {
		t.Errorf("%s: the shims changed during the exec probes: %v, then %v", h.Label, shims, after)
	}

	for i, pod := range pods {
		timed(t, n, &turn.Stop, "stop", "-t", "10", ctrs[i])
		timed(t, n, &turn.Rm, "rm", ctrs[i])
		timed(t, n, &turn.StopP, "stopp", pod)
		timed(t, n, &turn.RmP, "rmp", pod)
	}
	n.checkNothingLeft()
	waitFor(t, h.Label+"'s shims' exit", func() bool { return len(n.Processes(h.Shim)) == 0 })
	return turn
}

// probeTimeout bounds an exec probe, as a kubelet's probe timeout does.
const probeTimeout = 30 * time.Second

// probe runs the exec probe in container c, bounded by probeTimeout, and
// returns its time.
func (n *Node) probe(c string) (time.Duration, error) {
	args := []string{"--runtime-endpoint", CRIEndpoint, "--timeout", probeTimeout.String(),
		"exec", "-s", "--timeout", fmt.Sprint(int(probeTimeout.Seconds())), c, `C:\winproc-testapp.exe`, "exit", "0"}
	start := time.Now()
	_, _, err := n.Exec("", nil, InstallDir+`\crictl.exe`, args...)
	return time.Since(start), err
}

// timed runs crictl.exe with args, adds its time to d, and returns its
// output.
func timed(t *testing.T, n *Node, d *[]time.Duration, args ...string) string {
	t.Helper()
	start := time.Now()
	out := criRun(t, n, args...)
	*d = append(*d, time.Since(start))
	return out
}
