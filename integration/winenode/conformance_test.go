//go:build linux

package winenode

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/internal/winetest"
)

// ConformanceEnv names the directory `make conformance` has
// TestConformance write its reports to; unset, the test is skipped, so
// `make wine-node` does not run it.
const ConformanceEnv = "WINPROC_CONFORMANCE"

// ConformanceDocEnv names the document whose table TestConformance
// rewrites from the run (docs/conformance.md).
const ConformanceDocEnv = "WINPROC_CONFORMANCE_DOC"

// ConformanceRunsEnv names the runs (critestRuns' names, separated by
// commas) TestConformance is to make; unset, all of them. The document's
// table is rewritten only after all of them.
const ConformanceRunsEnv = "WINPROC_CONFORMANCE_RUNS"

// critestRun is one run of critest, on a node of its own: a column of
// the table.
type critestRun struct {
	// Name is the run's column and its files' suffix.
	Name string
	// Sandboxer is the winproc handler's sandboxer on the node.
	Sandboxer string
	// Handler is critest's -runtime-handler, the pods' handler; "" is
	// the node's default, winproc.
	Handler string
}

// critestRuns are winproc in both sandbox modes and the incumbent,
// runhcs, in the one it has (containerd's podsandbox), selected by
// critest's -runtime-handler as containerd's Windows CI selects it.
// Pulls without a handler go to the windowsfilter snapshotter in every
// run (conformanceConfig), the runhcs handler's too.
var critestRuns = []critestRun{
	{Name: "shim", Sandboxer: "shim"},
	{Name: "podsandbox", Sandboxer: "podsandbox"},
	{Name: "runhcs", Sandboxer: "podsandbox", Handler: RunhcsHandler},
}

// TestConformance runs cri-tools' CRI conformance suite, critest.exe at
// crictl's pinned version, as containerd's Windows CI runs it against
// runhcs: against containerd.exe's own Windows CRI on the Windows node,
// with winproc the default handler, in both sandbox modes, and against
// runhcs on the same kind of node. critest's images come from a registry
// on the loopback; its default image is the conformance image
// (critestimage). The JUnit report of each run and the table of specs go
// to the ConformanceEnv directory.
func TestConformance(t *testing.T) {
	dir := os.Getenv(ConformanceEnv)
	if dir == "" {
		t.Skipf("%s is unset: `make conformance` runs critest", ConformanceEnv)
	}
	critest := filepath.Join(bins.Containerd, "critest.exe")
	if _, err := os.Stat(critest); err != nil {
		t.Skipf("no critest.exe (build/tools.sh builds it): %v", err)
	}
	host, images := startConformanceRegistry(t)
	results := map[string]map[string]specResult{}
	runs, err := selectedRuns(os.Getenv(ConformanceRunsEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range runs {
		t.Run(run.Name, func(t *testing.T) {
			report := filepath.Join(dir, "junit-"+run.Name+".xml")
			runCritest(t, critest, host, images, run, report, filepath.Join(dir, "critest-"+run.Name+".log"))
			specs, err := readJUnit(report)
			if err != nil {
				t.Fatal(err)
			}
			results[run.Name] = specs
			if run.Handler == RunhcsHandler {
				recordRunhcs(t, specs)
				return
			}
			checkOutcomes(t, run.Name, specs)
		})
	}
	table := conformanceTable(results)
	if err := os.WriteFile(filepath.Join(dir, "conformance-table.md"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	if doc := os.Getenv(ConformanceDocEnv); doc != "" && len(results) == len(critestRuns) {
		if err := replaceTable(doc, table); err != nil {
			t.Error(err)
		}
	}
}

// conformanceConfig is the conformance node's own containerd config:
// pulls without a runtime handler (critest's image specs) unpack into
// windowsfilter, the default handler's snapshotter, not containerd's
// windows snapshotter; registries are mirrored through hosts.toml files.
var conformanceConfig = fmt.Sprintf(`version = 3

[plugins.'io.containerd.cri.v1.images']
  snapshotter = 'windowsfilter'
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = '%s'
`, certsDir)

// selectedRuns are the runs names (ConformanceRunsEnv) selects, in
// critestRuns' order; all of them for "".
func selectedRuns(names string) ([]critestRun, error) {
	if names == "" {
		return critestRuns, nil
	}
	var runs []critestRun
	for _, name := range strings.Split(names, ",") {
		i := slices.IndexFunc(critestRuns, func(r critestRun) bool { return r.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%s=%q: no run %q (the runs: shim, podsandbox, runhcs)", ConformanceRunsEnv, names, name)
		}
		runs = append(runs, critestRuns[i])
	}
	return runs, nil
}

// runCritest runs critest.exe on a node of its own for run, the JUnit
// report to report and its output to logFile.
func runCritest(t *testing.T, critest, host string, images []v1.Image, run critestRun, report, logFile string) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: run.Sandboxer, DefaultHandler: true, Runhcs: run.Handler == RunhcsHandler, Config: conformanceConfig})
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	mirrorRegistries(t, n, host)
	seedImageLayers(t, n, images)
	imagesFile := filepath.Join(t.TempDir(), "images.yaml")
	yaml := fmt.Sprintf("defaultTestContainerImage: %s\nwebServerTestImage: %s\n", conformanceImage, webServerImage)
	if err := os.WriteFile(imagesFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(report)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	args := []string{"-runtime-endpoint", CRIEndpoint, "-image-endpoint", CRIEndpoint,
		"-test-images-file", WindowsPath(imagesFile),
		"-ginkgo.junit-report", WindowsPath(report), "-ginkgo.no-color", "-ginkgo.v",
		"-test.timeout", "0"}
	if run.Handler != "" {
		args = append(args, "-runtime-handler", run.Handler)
	}
	cmd := winetest.Command(ctx, t, n.prefix, WindowsPath(critest), args...)
	// critest's output goes to logFile as it runs: a run takes minutes.
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out syncbuffer.Buffer
	w := io.MultiWriter(&out, f)
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err = cmd.Run()
	t.Logf("critest.exe in the %s run: %v after %v", run.Name, err, time.Since(start).Round(time.Second))
	if _, serr := os.Stat(report); serr != nil {
		t.Fatalf("critest.exe wrote no report (%v): %v\n%s", err, serr, tail(out.String(), 80))
	}
	if err := os.WriteFile(strings.TrimSuffix(logFile, ".log")+"-containerd.log", []byte(n.ContainerdLog()), 0o644); err != nil {
		t.Error(err)
	}
	if run.Name == "shim" {
		checkDNSReachedHCS(t, n)
	}
}

// checkDNSReachedHCS checks winproc's part of critest's DNS spec in shim
// mode, which Wine's ipconfig cannot show (docs/conformance.md): the
// pod's DNS search list reached a container's HCS document
// (Container.Networking DnsSearchList, where runhcs puts a spec's). In
// podsandbox mode containerd's Windows CRI puts no DNS in the specs, as
// for runhcs: a pod's DNS is the CNI plugin's (the HNS endpoint's).
func checkDNSReachedHCS(t *testing.T, n *Node) {
	t.Helper()
	docs, _ := filepath.Glob(filepath.Join(n.Path(`C:\ProgramData\winproc-standins\documents`), "*.json"))
	for _, d := range docs {
		if b, err := os.ReadFile(d); err == nil && strings.Contains(string(b), `"DnsSearchList":"google.com"`) {
			return
		}
	}
	t.Errorf("no HCS document of the %d kept has critest's DNS search list google.com", len(docs))
}
