//go:build linux

package winenode

import (
	"cmp"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// specResult is one spec's outcome in a critest run.
type specResult struct {
	Status  string // passed, failed, skipped (or pending, ...)
	Message string // the failure's message
}

// knownSkips are the specs critest skips on every runtime, by a part of
// their name, and why.
var knownSkips = map[string]string{
	"benchmark about": "benchmark: critest skips benchmarks unless -benchmark",
}

// knownFailures are the specs that fail on the Windows node, by a part of
// their name, and why: causes in Wine or upstream, never in winproc
// (docs/conformance.md holds the evidence).
var knownFailures = map[string]string{
	"public image with digest should be pulled and removed":      "names an upstream digest (gcr.io/k8s-staging-cri-tools/win-test-image-digest@sha256:0e8cc62a…) that no registry here can serve",
	"runtime should support attach":                              "Wine's cmd.exe (`cmd /Q`, critest's shell) prints no prompt and no output on piped stdin",
	"starting container with volume when host path is a symlink": "Wine 8's CreateSymbolicLinkW is a stub that makes nothing and reports success, so critest's symlink does not exist and containerd.exe makes an empty folder in its place",
	"runtime should support DNS config":                          "Wine's `ipconfig /all` prints no DNS Servers or DNS Suffix Search List line, and a container under Wine has no network adapter of its own; winproc's part, the search list in the HCS document, is checked beside the run",
}

// critestWindowsSpecs is how many specs critest v1.36.0 runs for Windows:
// 58 less the 5 benchmarks.
const critestWindowsSpecs = 53

// critestMinPassed is the floor of passes in each sandbox mode: every
// spec critest runs for Windows but those knownFailures names. It is
// below the 51 because the named failures are Wine's or
// upstream's (docs/conformance.md, spec by spec).
var critestMinPassed = critestWindowsSpecs - len(knownFailures)

// readJUnit reads ginkgo's JUnit report: the specs by name ("[It] ..."
// without the "[It] ").
func readJUnit(file string) (map[string]specResult, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read critest's report: %w", err)
	}
	var report struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Status  string `xml:"status,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &report); err != nil {
		return nil, fmt.Errorf("read critest's report %s: %w", file, err)
	}
	specs := map[string]specResult{}
	for _, s := range report.Suites {
		for _, c := range s.Cases {
			name, ok := strings.CutPrefix(c.Name, "[It] ")
			if !ok {
				continue // [BeforeSuite], [SynchronizedAfterSuite], ...
			}
			r := specResult{Status: c.Status}
			if c.Failure != nil {
				r.Message = c.Failure.Message
				if r.Status == "" {
					r.Status = "failed"
				}
			}
			if r.Status == "" && c.Skipped != nil {
				r.Status = "skipped"
			}
			if r.Status == "" {
				r.Status = "passed"
			}
			specs[name] = r
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("critest's report %s holds no specs", file)
	}
	return specs, nil
}

// knownOutcome is why spec does not pass, "" when no reason is known.
func knownOutcome(spec string) string {
	for part, why := range knownSkips {
		if strings.Contains(spec, part) {
			return why
		}
	}
	for part, why := range knownFailures {
		if strings.Contains(spec, part) {
			return why
		}
	}
	return ""
}

// checkOutcomes fails the test for what outcomeErrors finds.
func checkOutcomes(t *testing.T, sandboxer string, specs map[string]specResult) {
	t.Helper()
	for _, e := range outcomeErrors(sandboxer, specs) {
		t.Error(e)
	}
}

// outcomeErrors are a run's departures from the floor: each spec that
// does not pass for a reason knownSkips or knownFailures does not name,
// and fewer passes than critestMinPassed.
func outcomeErrors(sandboxer string, specs map[string]specResult) []string {
	var errs []string
	passed := 0
	for name, r := range specs {
		switch {
		case r.Status == "passed":
			passed++
		case knownOutcome(name) == "":
			errs = append(errs, fmt.Sprintf("%s mode: %s %s: %s", sandboxer, name, r.Status, firstLine(r.Message)))
		}
	}
	if passed < critestMinPassed {
		errs = append(errs, fmt.Sprintf("%s mode: %d specs passed, want at least %d (%d run for Windows less the %d knownFailures names)",
			sandboxer, passed, critestMinPassed, critestWindowsSpecs, len(knownFailures)))
	}
	slices.Sort(errs)
	return errs
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// conformanceTable is the Markdown table of the runs: each spec, its
// outcome in each mode, and why where it did not pass.
func conformanceTable(results map[string]map[string]specResult) string {
	var modes []string
	for _, r := range critestRuns {
		if _, ok := results[r.Name]; ok {
			modes = append(modes, r.Name)
		}
	}
	var names []string
	for _, m := range modes {
		for name := range results[m] {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, m := range modes {
		passed, run := 0, 0
		for _, r := range results[m] {
			if r.Status != "skipped" {
				run++
			}
			if r.Status == "passed" {
				passed++
			}
		}
		fmt.Fprintf(&b, "- %s mode: %d of %d specs run passed (%d in the report)\n", m, passed, run, len(results[m]))
	}
	fmt.Fprintf(&b, "\n| spec | %s | why not passed |\n|---%s|---|\n", strings.Join(modes, " | "), strings.Repeat("|---", len(modes)))
	for _, name := range names {
		fmt.Fprintf(&b, "| %s |", strings.ReplaceAll(name, "|", "\\|"))
		for _, m := range modes {
			fmt.Fprintf(&b, " %s |", cmp.Or(results[m][name].Status, "-"))
		}
		fmt.Fprintf(&b, " %s |\n", strings.ReplaceAll(whyNotPassed(results, modes, name), "|", "\\|"))
	}
	return b.String()
}

// The table's place in the document.
const (
	tableBegin = "<!-- critest table: TestConformance writes from here -->"
	tableEnd   = "<!-- critest table end -->"
)

// replaceTable puts table between the document's markers.
func replaceTable(doc, table string) error {
	b, err := os.ReadFile(doc)
	if err != nil {
		return fmt.Errorf("the conformance document: %w", err)
	}
	s := string(b)
	i, j := strings.Index(s, tableBegin), strings.Index(s, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q to put the table between", doc, tableBegin, tableEnd)
	}
	s = s[:i+len(tableBegin)] + "\n" + table + s[j:]
	return os.WriteFile(doc, []byte(s), 0o644)
}

// The report's reading and the table, on a report as ginkgo v2 writes it.
func TestConformanceReport(t *testing.T) {
	report := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4"><testsuite name="CRI validation" tests="4">
<testcase name="[BeforeSuite]" classname="CRI validation" status="passed"></testcase>
<testcase name="[It] [sig-node] Container runtime should support attach [Conformance]" classname="CRI validation" status="failed"><failure message="Timed out" type="failed">Timed out
at streaming.go</failure></testcase>
<testcase name="[It] [sig-node] Image Manager public image with tag should be pulled and removed [Conformance]" classname="CRI validation" status="passed"></testcase>
<testcase name="[It] [sig-node] Container benchmark about operations on Container benchmark about basic operations on Container" classname="CRI validation" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-node] Networking runtime should support mystery [Conformance]" classname="CRI validation" status="failed"><failure message="no DNS">no DNS</failure></testcase>
</testsuite></testsuites>`
	file := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(file, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := readJUnit(file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"[sig-node] Container runtime should support attach [Conformance]":                                           "failed",
		"[sig-node] Image Manager public image with tag should be pulled and removed [Conformance]":                  "passed",
		"[sig-node] Container benchmark about operations on Container benchmark about basic operations on Container": "skipped",
		"[sig-node] Networking runtime should support mystery [Conformance]":                                         "failed",
	}
	if len(specs) != len(want) {
		t.Fatalf("specs %v, want %v", specs, want)
	}
	for name, status := range want {
		if specs[name].Status != status {
			t.Errorf("%s: %q, want %q", name, specs[name].Status, status)
		}
	}
	table := conformanceTable(map[string]map[string]specResult{"shim": specs, "podsandbox": specs})
	for _, line := range []string{
		"- shim mode: 1 of 3 specs run passed (4 in the report)",
		"| [sig-node] Networking runtime should support mystery [Conformance] | failed | failed | unexpected: no DNS |",
		"| [sig-node] Container runtime should support attach [Conformance] | failed | failed | " + knownFailures["runtime should support attach"] + " |",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("the table lacks %q:\n%s", line, table)
		}
	}
	doc := filepath.Join(t.TempDir(), "conformance.md")
	os.WriteFile(doc, []byte("# c\n"+tableBegin+"\nold\n"+tableEnd+"\nafter\n"), 0o644)
	if err := replaceTable(doc, table); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(doc); !strings.Contains(string(b), tableBegin+"\n"+table+tableEnd+"\nafter") {
		t.Errorf("the document after replaceTable:\n%s", b)
	}
}

// The floor: the named failures and skips pass it, an unnamed failure or
// a missing pass does not.
func TestConformanceFloor(t *testing.T) {
	named := func() map[string]specResult {
		specs := map[string]specResult{"[k8s.io] Container benchmark about basic operations": {Status: "skipped"}}
		for part := range knownFailures {
			specs["[k8s.io] "+part+" [Conformance]"] = specResult{Status: "failed", Message: "failed"}
		}
		for i := len(specs) - 1; i < critestWindowsSpecs; i++ {
			specs[fmt.Sprintf("[k8s.io] spec %d [Conformance]", i)] = specResult{Status: "passed"}
		}
		return specs
	}
	tests := []struct {
		name   string
		change func(map[string]specResult)
		want   []string
	}{
		{name: "every failure named", change: func(map[string]specResult) {}},
		{name: "an unnamed failure", change: func(s map[string]specResult) {
			s["[k8s.io] spec 10 [Conformance]"] = specResult{Status: "failed", Message: "stop container timeout.\nmore"}
		}, want: []string{
			"shim mode: 48 specs passed, want at least 49 (53 run for Windows less the 4 knownFailures names)",
			"shim mode: [k8s.io] spec 10 [Conformance] failed: stop container timeout.",
		}},
		{name: "a pass missing from the report", change: func(s map[string]specResult) {
			delete(s, "[k8s.io] spec 10 [Conformance]")
		}, want: []string{"shim mode: 48 specs passed, want at least 49 (53 run for Windows less the 4 knownFailures names)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs := named()
			tt.change(specs)
			if got := outcomeErrors("shim", specs); !slices.Equal(got, tt.want) {
				t.Errorf("outcomeErrors:\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
