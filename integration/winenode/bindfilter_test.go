//go:build linux

package winenode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// goWinioResults are go-winio's own pkg/bindfilter tests against the
// stand-in bindfltapi.dll, and why any does not pass.
var goWinioResults = map[string]struct{ result, why string }{
	"TestApplyFileBinding":                {"PASS", ""},
	"TestApplyFileBindingReadOnly":        {"FAIL", "read-only mappings are recorded, not enforced: a Linux symbolic link cannot make what it shows read-only"},
	"TestEnsureOnlyOneTargetCanBeMounted": {"PASS", ""},
	"TestGetBindMappings":                 {"FAIL", "go-winio resolves the listed root with GetFinalPathNameByHandle, which under Wine follows the stand-in's link to the target; the bind filter answers the root (the listing itself is checked by the contract's TestMappingsListed)"},
	"TestRemoveFileBinding":               {"PASS", ""},
	"TestGetBindMappingsSymlinks":         {"FAIL", "Wine's CreateSymbolicLinkW answers success and makes no link (standins/standin.h), so the test's link is not found"},
}

// TestBindFilterStandin runs the stand-in bindfltapi.dll's contract tests
// (testdata/bindfltcontract, one case per behaviour it promises) and
// go-winio's own pkg/bindfilter tests, built from the module cache, under
// Wine with the stand-in in a private prefix's System32; go-winio's
// results must be those of goWinioResults.
func TestBindFilterStandin(t *testing.T) {
	template := winetest.Prefix(t)
	if os.Geteuid() != 0 {
		t.Skip("the private Wine prefix is an overlay mount, which needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.PrivatePrefix(t, template)
	if err := BuildStandin("bindfltapi.dll", filepath.Join(prefix, "drive_c", "windows", "system32")); err != nil {
		t.Fatal(err)
	}
	// The node's volume names and build (go-winio skips some of its
	// tests below RS5), without its services.
	n := &Node{t: t, prefix: prefix}
	n.nameVolumes()
	n.setHostBuild()
	dir := t.TempDir()
	t.Run("contract", func(t *testing.T) {
		got := runTests(ctx, t, prefix, buildWindowsTests(ctx, t, dir, "./testdata/bindfltcontract"))
		for name, result := range got {
			if result != "PASS" {
				t.Errorf("%s: %s", name, result)
			}
		}
		if len(got) < 10 {
			t.Errorf("%d contract tests ran, want 10", len(got))
		}
	})
	t.Run("go-winio", func(t *testing.T) {
		got := runTests(ctx, t, prefix, buildWindowsTests(ctx, t, dir, "github.com/Microsoft/go-winio/pkg/bindfilter"))
		for name, want := range goWinioResults {
			if got[name] != want.result {
				t.Errorf("go-winio's %s: %s, want %s %s", name, got[name], want.result, want.why)
			}
		}
		for name := range got {
			if _, ok := goWinioResults[name]; !ok {
				t.Errorf("go-winio's %s (%s) is not in goWinioResults", name, got[name])
			}
		}
	})
}

// buildWindowsTests builds the Windows tests of pkg into dir.
func buildWindowsTests(ctx context.Context, t *testing.T, dir, pkg string) string {
	t.Helper()
	exe := filepath.Join(dir, filepath.Base(pkg)+".test.exe")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-overlay", removeAllOverlay(t), "-o", exe, pkg)
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the Windows tests of %s: %v\n%s", pkg, err, b)
	}
	return exe
}

// removeAllOverlay is a build overlay (go build -overlay) of the Go
// runtime for tests under Wine, as build/tools.sh builds containerd.exe:
// Wine 8 answers NtSetInformationFile(FileDispositionInformationEx) with
// STATUS_NOT_IMPLEMENTED, which the runtime's fallback does not take, so
// os.RemoveAll (t.TempDir's cleanup) fails under Wine.
func removeAllOverlay(t *testing.T) string {
	t.Helper()
	src := filepath.Join(runtime.GOROOT(), "src", "internal", "syscall", "windows", "at_windows.go")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	const old = "STATUS_NOT_SUPPORTED:     // the file system"
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has changed: update removeAllOverlay (and build/tools.sh)", src)
	}
	dir := t.TempDir()
	patched := filepath.Join(dir, "at_windows.go")
	b = bytes.Replace(b, []byte(old), []byte("STATUS_NOT_SUPPORTED, NTStatus(0xC0000002): // or Wine 8; the file system"), 1)
	if err := os.WriteFile(patched, b, 0o644); err != nil {
		t.Fatal(err)
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {src: patched}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(file, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

var testResult = regexp.MustCompile(`(?m)^--- (PASS|FAIL|SKIP): (\S+)`)

// runTests runs a test binary under Wine in prefix and returns each
// top-level test's result.
func runTests(ctx context.Context, t *testing.T, prefix, exe string) map[string]string {
	t.Helper()
	out, err := winetest.Command(ctx, t, prefix, exe, "-test.v").CombinedOutput()
	if _, cerr := winetest.ExitCode(err); cerr != nil {
		t.Fatalf("%s under Wine: %v\n%s", filepath.Base(exe), err, out)
	}
	t.Logf("under Wine:\n%s", out)
	got := make(map[string]string)
	for _, m := range testResult.FindAllStringSubmatch(string(out), -1) {
		got[m[2]] = m[1]
	}
	return got
}
