//go:build linux

package winenode

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestPDHStandin runs the stand-in pdh.dll's contract tests
// (testdata/pdhcontract, one case per behaviour it promises) under Wine,
// with the stand-in in a private prefix's System32 loaded for the test
// program as the node loads it for kubelet.exe (a DllOverrides of the
// program's own).
func TestPDHStandin(t *testing.T) {
	template := winetest.Prefix(t)
	if os.Geteuid() != 0 {
		t.Skip("the private Wine prefix is an overlay mount, which needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.PrivatePrefix(t, template)
	if err := BuildStandin(KubeletStandin, filepath.Join(prefix, "drive_c", "windows", "system32")); err != nil {
		t.Fatal(err)
	}
	exe := buildWindowsTests(ctx, t, t.TempDir(), "./testdata/pdhcontract")
	n := &Node{t: t, prefix: prefix}
	n.importRegistry([]string{
		`[HKEY_CURRENT_USER\Software\Wine\AppDefaults\` + filepath.Base(exe) + `\DllOverrides]`,
		`"pdh"="native"`,
	})
	got := runTests(ctx, t, prefix, exe)
	for name, result := range got {
		if result != "PASS" {
			t.Errorf("%s: %s", name, result)
		}
	}
	if len(got) < 6 {
		t.Errorf("%d contract tests ran, want 6", len(got))
	}
}
