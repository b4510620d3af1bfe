//go:build linux

package jobcontainer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestBindFilterUnderWine runs the Windows tests TestBindFilter... under
// Wine against the node's stand-in bindfltapi.dll
// (integration/winenode/testdata/standins, which answers as the bind
// filter does and has contract tests of its own), built with MinGW into a
// private prefix's System32: a file mount named through its volume's
// GUID, and bindings never made or dropped by a reboot released. It runs
// in both of the binding's builds (winetest.BindingBuilds), as the binding
// hands the filter pointers.
func TestBindFilterUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.RootPrefix(t)
	dll := filepath.Join(prefix, "drive_c", "windows", "system32", "bindfltapi.dll")
	src := filepath.Join("..", "..", "integration", "winenode", "testdata", "standins", "bindfltapi.c")
	winetest.BuildDLL(ctx, t, src, dll)
	// Wine names C: \\?\Volume{...43}\ but opens no path under that name
	// without a device name for it in dosdevices, as the Windows node
	// makes (integration/winenode node.go nameVolumes).
	if err := os.Symlink("../drive_c", filepath.Join(prefix, "dosdevices", "volume{00000000-0000-0000-0000-000000000043}")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range winetest.BindingBuilds {
		t.Run(tc.Name, func(t *testing.T) {
			exe := winetest.BuildTests(ctx, t, dir, tc.Name, tc.Flags...)
			cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestBindFilter", "-test.v")
			out := winetest.RunTests(t, "the bind filter's Windows tests", cmd, "TestBindFilterReleaseUnbound")
			if strings.Contains(out, "--- SKIP") {
				t.Fatal("the bind filter's Windows tests skipped a test under Wine")
			}
		})
	}
}
