//go:build linux

package winenode

import (
	"slices"
	"strings"
	"testing"
)

// runhcsOutcomes are the specs that do not pass against runhcs for a
// reason of runhcs's own on this node, by a part of their name, and why
// (docs/conformance.md holds the evidence). The reasons of
// knownSkips and knownFailures hold for runhcs too.
var runhcsOutcomes = map[string]string{}

// runhcsOutcome is why spec does not pass against runhcs, "" when no
// reason is known.
func runhcsOutcome(spec string) string {
	if why := knownOutcome(spec); why != "" {
		return why
	}
	return matchOutcome(runhcsOutcomes, spec)
}

// recordRunhcs logs the runhcs run's outcomes. runhcs is the incumbent,
// measured, not judged: none of its failures fails the test, and one no
// reason names shows as unexplained in the table.
func recordRunhcs(t *testing.T, specs map[string]specResult) {
	t.Helper()
	passed := 0
	for name, r := range specs {
		switch {
		case r.Status == "passed":
			passed++
		case runhcsOutcome(name) == "":
			t.Logf("runhcs: %s %s (unexplained): %s", name, r.Status, firstLine(r.Message))
		}
	}
	t.Logf("runhcs: %d of %d specs passed", passed, len(specs))
}

// matchOutcome is the reason in outcomes whose key is a part of spec.
func matchOutcome(outcomes map[string]string, spec string) string {
	for part, why := range outcomes {
		if strings.Contains(spec, part) {
			return why
		}
	}
	return ""
}

// whyNotPassed is the table's reason for spec in the runs modes: each
// distinct reason of a run that did not pass it, a winproc run's failure
// no reason names as "unexpected", a runhcs one as "unexplained".
func whyNotPassed(results map[string]map[string]specResult, modes []string, spec string) string {
	var whys []string
	for _, m := range modes {
		r, ok := results[m][spec]
		if !ok || r.Status == "passed" {
			continue
		}
		why := knownOutcome(spec)
		if m == "runhcs" {
			why = runhcsOutcome(spec)
			if why == "" {
				why = "runhcs unexplained: " + firstLine(r.Message)
			} else if why != knownOutcome(spec) {
				why = "runhcs: " + why
			}
		} else if why == "" {
			why = "unexpected: " + firstLine(r.Message)
		}
		if !slices.Contains(whys, why) {
			whys = append(whys, why)
		}
	}
	return strings.Join(whys, "; ")
}

// The table with the runhcs column: each run's outcome, and the reasons
// of the runs that did not pass, runhcs's marked as its own.
func TestConformanceTableRunhcs(t *testing.T) {
	const (
		attach  = "[sig-node] Container runtime should support attach [Conformance]"
		stop    = "[sig-node] Idempotence StopContainer should not return an error if already stopped"
		mystery = "[sig-node] Networking runtime should support mystery [Conformance]"
	)
	passed, failed := specResult{Status: "passed"}, func(msg string) specResult { return specResult{Status: "failed", Message: msg} }
	results := map[string]map[string]specResult{
		"shim":       {attach: failed("no prompt"), stop: passed, mystery: passed},
		"podsandbox": {attach: failed("no prompt"), stop: failed("stop timeout"), mystery: passed},
		"runhcs":     {attach: failed("no prompt"), stop: passed, mystery: failed("no DNS\nat dns.go")},
	}
	table := conformanceTable(results)
	for _, line := range []string{
		"- runhcs mode: 1 of 3 specs run passed (3 in the report)",
		"| spec | shim | podsandbox | runhcs | why not passed |\n|---|---|---|---|---|\n",
		"| " + attach + " | failed | failed | failed | " + knownFailures["runtime should support attach"] + " |",
		"| " + stop + " | passed | failed | passed | unexpected: stop timeout |",
		"| " + mystery + " | passed | passed | failed | runhcs unexplained: no DNS |",
	} {
		if !strings.Contains(table, line) {
			t.Errorf("the table lacks %q:\n%s", line, table)
		}
	}
}

// WINPROC_CONFORMANCE_RUNS selects runs by name, in critestRuns' order,
// and refuses a name that is no run's.
func TestConformanceSelectedRuns(t *testing.T) {
	for _, tc := range []struct {
		names   string
		want    []string
		wantErr bool
	}{
		{names: "", want: []string{"shim", "podsandbox", "runhcs"}},
		{names: "runhcs", want: []string{"runhcs"}},
		{names: "shim,runhcs", want: []string{"shim", "runhcs"}},
		{names: "runhcs,nope", wantErr: true},
	} {
		runs, err := selectedRuns(tc.names)
		if (err != nil) != tc.wantErr {
			t.Errorf("selectedRuns(%q): %v, want an error %v", tc.names, err, tc.wantErr)
			continue
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("selectedRuns(%q) = %v, want %v", tc.names, got, tc.want)
		}
	}
}
