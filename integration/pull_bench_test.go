//go:build linux

package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/remotes/docker"
	"github.com/containerd/containerd/v2/core/remotes/docker/config"
	"github.com/containerd/log"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/winimage"
)

// pullLayers are the benchmark image's layers, bottom first: sizes and
// file counts of a servercore-based image's (servercore's base layer holds
// about 100,000 files in 5 GB, 50 KB a file), scaled down to 860 MB and
// 25,800 files so that a run fits a small machine.
var pullLayers = []struct{ files, mb int }{{9000, 300}, {6000, 200}, {4500, 150}, {3000, 100}, {1800, 60}, {1500, 50}}

// pullRoundsEnv sets the benchmark's rounds (default 3); the median round
// of each figure counts.
const pullRoundsEnv = "WINPROC_PULL_ROUNDS"

// pullSettle is the pause between removing a pull's image and the next
// pull (see timePulls).
const pullSettle = 65 * time.Second

// BenchmarkPull measures pulls of a 6-layer Windows image from a registry
// on 127.0.0.1 into two emulated nodes side by side: one with today's
// sequential unpack (UnpackConcurrency 1), one with the generated config's
// parallel unpack. Each round pulls, on each node, through the transfer
// service (ctr images pull) and through CRI (crictl pull); on the parallel
// node also two pulls of the image at once (ctr, crictl), and one and two
// pulls of the Go client (client.Pull with WithPullUnpack: containerd's
// unpacker in the client, which no lock of containerd's keeps from
// extracting a layer twice). Before every pull the node's
// images, snapshots and content are removed, so a pull downloads and
// unpacks everything. docs/pull.md has the figures.
func BenchmarkPull(b *testing.B) {
	rounds := 3
	if v := os.Getenv(pullRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", pullRoundsEnv, v)
		}
		rounds = n
	}
	start := time.Now()
	reg := startRegistry(b, pullBenchImage(b))
	image := reg.Host + "/winproc/pullbench:1"
	mb, files := 0, 0
	for _, l := range pullLayers {
		mb, files = mb+l.mb, files+l.files
	}
	b.Logf("image built in %v: %d layers, %d MB, %d files", time.Since(start).Round(time.Second), len(pullLayers), mb, files)

	seq := node.StartWith(b, bins, node.Options{LogLevel: "warn", UnpackConcurrency: 1})
	par := node.StartWith(b, bins, node.Options{LogLevel: "warn"})
	figures := pullFigures(b, seq, par, image)
	times := map[string][]time.Duration{}
	for r := range rounds {
		for i := range figures {
			// Odd rounds run the figures backwards, so that drifting load
			// weighs on both sides of a ratio alike.
			f := figures[i]
			if r%2 == 1 {
				f = figures[len(figures)-1-i]
			}
			d, cpu, sent := timePulls(b, f.n, reg, f.pulls, f.pull)
			times[f.name] = append(times[f.name], d)
			b.Logf("round %d: %-18s %6.2f s, containerd and snapshotter %5.1f CPU s, %4d MB from the registry", r+1, f.name, d.Seconds(), cpu.Seconds(), sent/1e6)
		}
	}
	med := func(name string) float64 {
		ds := slices.Clone(times[name])
		slices.Sort(ds)
		return ds[len(ds)/2].Seconds()
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(med("sequential ctr"), "seq-ctr-s")
	b.ReportMetric(med("parallel ctr"), "par-ctr-s")
	b.ReportMetric(med("sequential ctr")/med("parallel ctr"), "ctr-speedup")
	b.ReportMetric(med("sequential crictl")/med("parallel crictl"), "crictl-speedup")
	b.ReportMetric(med("parallel ctr x2")/med("parallel ctr"), "ctr-2pulls-ratio")
	b.ReportMetric(med("parallel crictl x2")/med("parallel crictl"), "crictl-2pulls-ratio")
	b.ReportMetric(med("client pull x2")/med("client pull"), "client-2pulls-ratio")
}

// pullFigure is a figure of BenchmarkPull: pulls at once of pull on n.
type pullFigure struct {
	name  string
	n     *node.Node
	pulls int
	pull  func() error
}

// pullFigures are BenchmarkPull's figures, pulling image into the
// sequential node seq and the parallel node par.
func pullFigures(b *testing.B, seq, par *node.Node, image string) []pullFigure {
	ctx := context.Background()
	run := func(cmd func() *exec.Cmd) func() error {
		return func() error {
			c := cmd()
			if out, err := c.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w\n%s", strings.Join(c.Args, " "), err, out)
			}
			return nil
		}
	}
	ctr := func(n *node.Node) func() error {
		return run(func() *exec.Cmd {
			return exec.Command(filepath.Join(n.Tools, "ctr"), "-a", n.Address, "-n", node.Namespace, "images", "pull",
				"--platform", containerdnames.Platform, "--snapshotter", containerdnames.Snapshotter, image)
		})
	}
	crictl := func(n *node.Node) func() error {
		return run(func() *exec.Cmd { return n.CrictlCommand(ctx, "--timeout=600s", "pull", image) })
	}
	// The client's resolver tells, at info level, of every pull from a
	// loopback registry that it tries HTTPS first.
	level := log.GetLevel()
	log.SetLevel("warn")
	b.Cleanup(func() { log.SetLevel(level.String()) })
	client, err := containerd.New(par.Address, containerd.WithDefaultNamespace(node.Namespace))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	// The Go client's pull unpacks with containerd's unpacker in this
	// process, where no lock of containerd's keeps two pulls from
	// extracting a layer twice.
	clientPull := func() error {
		resolver := docker.NewResolver(docker.ResolverOptions{Hosts: config.ConfigureHosts(ctx, config.HostOptions{})})
		_, err := client.Pull(ctx, image, containerd.WithResolver(resolver), containerd.WithPullUnpack,
			containerd.WithPlatform(containerdnames.Platform), containerd.WithPullSnapshotter(containerdnames.Snapshotter))
		return err
	}
	return []pullFigure{
		{"sequential ctr", seq, 1, ctr(seq)},
		{"parallel ctr", par, 1, ctr(par)},
		{"sequential crictl", seq, 1, crictl(seq)},
		{"parallel crictl", par, 1, crictl(par)},
		{"parallel ctr x2", par, 2, ctr(par)},
		{"parallel crictl x2", par, 2, crictl(par)},
		{"client pull", par, 1, clientPull},
		{"client pull x2", par, 2, clientPull},
	}
}

// timePulls removes n's images (and with them, at garbage collection, its
// snapshots and content), then runs pulls pulls at once and returns
// the time until the last ends, the CPU time containerd and the snapshotter
// used meanwhile, and the bytes the registry sent. Each pull must leave the
// image's layers unpacked.
func timePulls(b *testing.B, n *node.Node, reg *ociRegistry, pulls int, pull func() error) (time.Duration, time.Duration, int64) {
	b.Helper()
	ctx := context.Background()
	if err := n.RemoveImages(ctx); err != nil {
		b.Fatal(err)
	}
	if got := committedSnapshots(b, n); got != 0 {
		b.Fatalf("%d snapshots left after removing the images", got)
	}
	// The last pull's writes and deletions are not this one's to pay for:
	// ext4 passes over inodes deleted less than a minute ago when it
	// allocates one (recently_deleted, fs/ext4/ialloc.c: RECENTCY_MIN,
	// once the inode table is written back), which made a pull right after
	// removing the last one's 25,800 files cost up to twice the CPU.
	unix.Sync()
	time.Sleep(pullSettle)
	sent := reg.sent.Load()
	daemons := []int{n.ContainerdPID(), n.SnapshotterPID()}
	cpu := cpuOf(daemons)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, pulls)
	for i := range pulls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = pull()
		}()
	}
	wg.Wait()
	d := time.Since(start)
	cpu = cpuOf(daemons) - cpu
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	if got := committedSnapshots(b, n); got != len(pullLayers) {
		b.Fatalf("%d layers unpacked, want %d", got, len(pullLayers))
	}
	return d, cpu, reg.sent.Load() - sent
}

// committedSnapshots counts the snapshots of winproc's snapshotter in the
// node's namespace.
func committedSnapshots(b *testing.B, n *node.Node) int {
	b.Helper()
	out, err := n.Ctr(context.Background(), "snapshots", "--snapshotter", containerdnames.Snapshotter, "ls")
	if err != nil {
		b.Fatal(err)
	}
	return strings.Count(out, "Committed")
}

// pullBenchImage builds the benchmark image with the project's image
// tooling and writes it as an OCI layout; it returns the layout's
// directory.
func pullBenchImage(b *testing.B) string {
	b.Helper()
	ctx := context.Background()
	var layers []v1.Layer
	for i, l := range pullLayers {
		tree := filepath.Join(b.TempDir(), "tree")
		writePullTree(b, tree, uint64(i), l.files, int64(l.mb)<<20)
		var opts []winimage.LayerOption
		if i == 0 {
			opts = append(opts, winimage.AsBaseLayer())
		}
		layer, err := winimage.LayerFromTree(ctx, tree, opts...)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.RemoveAll(tree); err != nil {
			b.Fatal(err)
		}
		layers = append(layers, layer)
	}
	img, err := winimage.Build(winimage.Config{OSVersion: node.HostBuild + ".1", Entrypoint: []string{`C:\Windows\System32\cmd.exe`}}, layers...)
	if err != nil {
		b.Fatal(err)
	}
	layout := filepath.Join(b.TempDir(), "layout")
	if err := winimage.Write(ctx, layout, winimage.FormatOCILayout, "winproc/pullbench:1", img); err != nil {
		b.Fatal(err)
	}
	return layout
}

// writePullTree writes files files of total bytes below dir, 40 to a
// directory, three levels deep: sizes spread log-uniformly from 512 bytes
// to 4 MB (many small files, a few large ones, as in Windows\WinSxS), data
// half random and half repeated text, which gzip halves as it does
// binaries.
func writePullTree(b *testing.B, dir string, seed uint64, files int, total int64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(seed, 27))
	sizes := make([]float64, files)
	var sumSizes float64
	for i := range sizes {
		sizes[i] = math.Exp(math.Log(512) + rng.Float64()*(math.Log(4<<20)-math.Log(512)))
		sumSizes += sizes[i]
	}
	text := []byte(strings.Repeat("This program cannot be run in DOS mode.\r\n", 7))[:256]
	data := make([]byte, 4<<20)
	chacha := rand.NewChaCha8([32]byte{byte(seed)})
	for off := 0; off < len(data); off += 512 {
		chacha.Read(data[off : off+256])
		copy(data[off+256:off+512], text)
	}
	for i, s := range sizes {
		n := int(s * float64(total) / sumSizes)
		p := filepath.Join(dir, "Windows", "WinSxS", fmt.Sprintf("amd64_l%d_%03d", seed, i/800), fmt.Sprintf("d%02d", i/40%20), fmt.Sprintf("f%05d.dll", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		off := rng.IntN(len(data) - min(n, len(data)) + 1)
		if err := os.WriteFile(p, data[off:off+min(n, len(data))], 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
