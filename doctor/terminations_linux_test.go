package doctor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/winproc/winproc/internal/containerdnames"
)

// TestCheckTerminations lays out a system whose teardown is pending (its
// state.json as the emulation records it) and one that is not: the check
// warns with the pending one, and passes once it is gone.
func TestCheckTerminations(t *testing.T) {
	state := t.TempDir()
	ns := filepath.Join(state, containerdnames.EmulationStateDir, "k8s.io")
	for id, record := range map[string]string{
		"stuck": `{"version":1,"id":"stuck","teardown":{"attempts":3,"lastError":"remove the silo's cgroup: busy","since":"2025-01-02T03:04:05Z"}}`,
		"fine":  `{"version":1,"id":"fine"}`,
	} {
		if err := os.MkdirAll(filepath.Join(ns, id), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ns, id, "state.json"), []byte(record), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func() Result {
		d := &run{goos: "linux", cfg: &Config{State: state}}
		d.checkTerminations()
		return d.report.Checks[0]
	}
	r := check()
	if r.Name != CheckTerminations || r.Status != Warn || len(r.Details) != 1 ||
		!strings.Contains(r.Details[0], "k8s.io/stuck: 3 attempts since 2025-01-02T03:04:05Z, last error: remove the silo's cgroup: busy") {
		t.Errorf("with a pending teardown: %+v", r)
	}
	if err := os.RemoveAll(filepath.Join(ns, "stuck")); err != nil {
		t.Fatal(err)
	}
	if r := check(); r.Status != OK || r.Summary != "none" {
		t.Errorf("with none pending: %+v", r)
	}
}
