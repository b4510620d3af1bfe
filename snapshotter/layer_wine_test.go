//go:build linux

package snapshotter

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestLayerDriverUnderWine runs the Windows test TestLayerDriverFaults
// under Wine, through hcsshim's layer functions to the stand-in
// vmcompute.dll of the Windows node (integration/winenode/testdata/standins,
// built with MinGW and installed in a private prefix's System32, where
// hcsshim loads it from). It leaves the Windows snapshotter a leftover
// layer, activated, with a link to a directory outside the root: the
// start's cleanup must destroy the link, not what it points to.
func TestLayerDriverUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.RootPrefix(t)
	dll := filepath.Join(prefix, "drive_c", "windows", "system32", "vmcompute.dll")
	src := filepath.Join("..", "integration", "winenode", "testdata", "standins", "vmcompute.c")
	winetest.BuildDLL(ctx, t, src, dll)

	dir := t.TempDir()
	root, target := filepath.Join(dir, "root"), filepath.Join(dir, "target")
	leftover := filepath.Join(root, "snapshots", "7")
	for _, d := range []string{filepath.Join(leftover, "Files"), target} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for file, content := range map[string]string{
		filepath.Join(target, "kept"):             "x",
		filepath.Join(leftover, "standin-active"): "active",
	} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(target, filepath.Join(leftover, "Files", "link")); err != nil {
		t.Fatal(err)
	}

	exe := winetest.BuildTests(ctx, t, dir, "snapshotter")
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestLayerDriverFaults$", "-test.v")
	cmd.Env = append(cmd.Env, layerRootEnv+"="+winetest.WinPath(root))
	winetest.RunTests(t, "TestLayerDriverFaults", cmd)
	if _, err := os.Stat(filepath.Join(target, "kept")); err != nil {
		t.Errorf("destroying the layer deleted what its link points to: %v", err)
	}
	if got := entries(t, filepath.Join(root, "snapshots")); len(got) != 0 {
		t.Errorf("snapshots/ holds %v after the test, want nothing", got)
	}
}
