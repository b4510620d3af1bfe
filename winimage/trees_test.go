package winimage_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/winproc/winproc/winimage"
)

func treeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildTrees(t *testing.T) {
	ctx := context.Background()
	app := treeDir(t, map[string]string{"app.exe": "MZ"})
	cfg := winimage.Config{Entrypoint: []string{`C:\app.exe`}}
	layerCount := func(t *testing.T, a winimage.Artifact) int {
		t.Helper()
		img, ok := a.(v1.Image)
		if !ok {
			t.Fatalf("%T is not an image", a)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		return len(ls)
	}

	// The default: a synthetic base layer under the trees.
	a, err := winimage.BuildTrees(ctx, winimage.TreesOptions{Config: cfg, Trees: []string{app}, OSVersions: []string{"10.0.20348.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := layerCount(t, a); n != 2 {
		t.Errorf("synthetic base: %d layers, want 2", n)
	}
	if got := mustConfig(t, a.(v1.Image)).OSVersion; got != "10.0.20348.1" {
		t.Errorf("os.version %s", got)
	}

	// NoBase: the first tree is the base layer.
	a, err = winimage.BuildTrees(ctx, winimage.TreesOptions{Config: cfg, Trees: []string{app}, NoBase: true, OSVersions: []string{"10.0.20348.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := layerCount(t, a); n != 1 {
		t.Errorf("no base: %d layers, want 1", n)
	}

	// Several builds: an index of one image per build.
	a, err = winimage.BuildTrees(ctx, winimage.TreesOptions{Config: cfg, Trees: []string{app}, OSVersions: []string{"10.0.17763.1", "10.0.20348.1"}})
	if err != nil {
		t.Fatal(err)
	}
	idx, ok := a.(v1.ImageIndex)
	if !ok {
		t.Fatalf("two builds gave a %T, want an index", a)
	}
	if im, err := idx.IndexManifest(); err != nil || len(im.Manifests) != 2 {
		t.Fatalf("index: %v, %v", im, err)
	}

	// On a base image: appended, keeping the base's build.
	base := buildImage(t, winimage.Config{OSVersion: "10.0.20348.2227"}, map[string]string{"base.txt": "b"})
	a, err = winimage.BuildTrees(ctx, winimage.TreesOptions{Config: cfg, Trees: []string{app}, Base: base})
	if err != nil {
		t.Fatal(err)
	}
	if n, want := layerCount(t, a), layerCount(t, base)+1; n != want {
		t.Errorf("on a base: %d layers, want the base's and the tree, %d", n, want)
	}
	if got := mustConfig(t, a.(v1.Image)).OSVersion; got != "10.0.20348.2227" {
		t.Errorf("on a base: os.version %s, want the base's", got)
	}

	for _, tc := range []struct {
		name string
		o    winimage.TreesOptions
		want string
	}{
		{"no tree", winimage.TreesOptions{OSVersions: []string{"10.0.20348.1"}}, "at least one tree"},
		{"base and no-base", winimage.TreesOptions{Trees: []string{app}, Base: base, NoBase: true}, "exclude each other"},
		{"base and two builds", winimage.TreesOptions{Trees: []string{app}, Base: base, OSVersions: []string{"10.0.17763.1", "10.0.20348.1"}}, "at most one os.version"},
		{"no build", winimage.TreesOptions{Trees: []string{app}}, "needs an os.version"},
	} {
		if _, err := winimage.BuildTrees(ctx, tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
