//go:build linux

package integration

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/winimage"
)

// pauseImage builds the pause image for osVersion with the project's tooling
// and returns the archive's path.
func pauseImage(t *testing.T, ref, osVersion string) string {
	t.Helper()
	ctx := context.Background()
	img, err := winimage.PauseImage(ctx, winimage.PauseOptions{
		PauseExe:  filepath.Join(winBins, "pause.exe"),
		WincatExe: filepath.Join(winBins, "wincat.exe"),
		OSVersion: osVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := winimage.Write(ctx, out, winimage.FormatDockerArchive, ref, img); err != nil {
		t.Fatal(err)
	}
	return out
}

// imageArchive builds image ref for osVersion with the project's tooling:
// the synthetic base layer and one layer holding files (path below C:\ →
// content), running entrypoint. It returns the archive's path.
func imageArchive(t testing.TB, ref, osVersion, entrypoint string, files map[string][]byte) string {
	t.Helper()
	ctx := context.Background()
	tree := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(tree, name), content, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base, err := winimage.SyntheticBaseLayer(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	top, err := winimage.LayerFromTree(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Build(winimage.Config{OSVersion: osVersion, Entrypoint: []string{entrypoint}}, base, top)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	if err := winimage.Write(ctx, archive, winimage.FormatOCIArchive, ref, img); err != nil {
		t.Fatal(err)
	}
	return archive
}

// winBin reads one of the Windows programs built for this run.
func winBin(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(winBins, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snapshotDirs lists the snapshot directories of the node's snapshotter.
func snapshotDirs(t *testing.T, n *node.Node) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.SnapshotterRoot, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, filepath.Join(n.SnapshotterRoot, "snapshots", e.Name()))
	}
	return dirs
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestImportUnpacksIntoWindowsfilter(t *testing.T) {
	n := node.Start(t, bins)
	ctx := context.Background()
	const ref = "example.com/winproc/pause:test"
	archive := pauseImage(t, ref, node.HostBuild+".1")

	if out, err := n.Ctr(ctx, "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive); err != nil {
		t.Fatalf("import: %v", err)
	} else {
		t.Logf("ctr images import:\n%s", out)
	}

	// Two layers, both committed, the pause layer on the base layer.
	out, err := n.Ctr(ctx, "snapshots", "--snapshotter", "windowsfilter", "ls")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ctr snapshots --snapshotter windowsfilter ls:\n%s", out)
	rows := regexp.MustCompile(`(?m)^(sha256:[0-9a-f]{64})\s+(sha256:[0-9a-f]{64})?\s*Committed\s*$`).FindAllStringSubmatch(out, -1)
	if len(rows) != 2 {
		t.Fatalf("want 2 committed snapshots, got %d:\n%s", len(rows), out)
	}
	parents := map[string]string{rows[0][1]: rows[0][2], rows[1][1]: rows[1][2]}
	var base, top string
	for k, p := range parents {
		if p == "" {
			base = k
		} else {
			top = k
		}
	}
	if base == "" || top == "" || parents[top] != base {
		t.Fatalf("snapshots do not form a chain: %v", parents)
	}

	// Each layer's files are under its own Files/.
	dirs := snapshotDirs(t, n)
	if len(dirs) != 2 {
		t.Fatalf("snapshot directories: %v, want 2", dirs)
	}
	var baseDir, pauseDir string
	for _, d := range dirs {
		switch {
		case exists(filepath.Join(d, "Files", winimage.SyntheticBaseMarker)):
			baseDir = d
		case exists(filepath.Join(d, "Files", winimage.PauseExePath)):
			pauseDir = d
		}
	}
	if baseDir == "" || pauseDir == "" {
		t.Fatalf("no layer holds the base marker or pause.exe: %v", dirs)
	}
	for _, f := range []string{winimage.PauseExePath, winimage.WincatExePath} {
		if !exists(filepath.Join(pauseDir, "Files", filepath.FromSlash(f))) {
			t.Errorf("pause layer %s has no Files/%s", pauseDir, f)
		}
	}
	if !exists(filepath.Join(baseDir, "Hives")) {
		t.Errorf("base layer %s has no Hives/", baseDir)
	}

	// Removing the image removes every snapshot and its directory. A
	// docker-archive import records the image twice: by name and by config
	// digest.
	if err := n.RemoveImages(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Ctr(ctx, "snapshots", "--snapshotter", "windowsfilter", "ls"); err != nil || strings.Contains(out, "sha256:") {
		t.Errorf("snapshots left after image removal: %v\n%s", err, out)
	}
	if left := snapshotDirs(t, n); len(left) != 0 {
		t.Errorf("snapshot directories left after image removal: %v", left)
	}
}

func TestImportRefusesIncompatibleBuild(t *testing.T) {
	n := node.Start(t, bins)
	ctx := context.Background()
	const ref = "example.com/winproc/pause:ltsc2019"
	archive := pauseImage(t, ref, "10.0.17763.1")

	out, err := n.Ctr(ctx, "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive)
	if err == nil {
		t.Fatalf("an ltsc2019 image was unpacked on an ltsc2022 host:\n%s", out)
	}
	want := `is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`
	if !strings.Contains(out, want) {
		t.Errorf("import failed without the build message %q:\n%s", want, out)
	}
	// The unpacker drops its unpack snapshot; containerd removes it from
	// the snapshotter at the next garbage collection.
	if err := n.CollectGarbage(ctx); err != nil {
		t.Fatal(err)
	}
	if left := snapshotDirs(t, n); len(left) != 0 {
		t.Errorf("refused image left snapshot directories: %v", left)
	}
}
