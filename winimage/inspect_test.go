package winimage_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/winproc/winproc/winimage"
)

func TestInspect(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")
	idx, err := winimage.NewIndex(pauseLikeImage(t, "10.0.17763.1"), img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		format winimage.Format
		a      winimage.Artifact
		names  []string
		images int
	}{
		{winimage.FormatDockerArchive, img, []string{"example/pause:1.0"}, 1},
		{winimage.FormatOCIArchive, img, []string{"docker.io/example/pause:1.0"}, 1},
		{winimage.FormatOCILayout, img, []string{"docker.io/example/pause:1.0"}, 1},
		{winimage.FormatOCIArchive, idx, []string{"docker.io/example/pause:1.0"}, 2},
		{winimage.FormatOCILayout, idx, []string{"docker.io/example/pause:1.0"}, 2},
	} {
		_, isIndex := tc.a.(v1.ImageIndex)
		name := string(tc.format)
		if isIndex {
			name += "-index"
		}
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := winimage.Write(ctx, p, tc.format, "example/pause:1.0", tc.a); err != nil {
				t.Fatal(err)
			}
			ins, err := winimage.Inspect(p)
			if err != nil {
				t.Fatal(err)
			}
			if ins.Format != tc.format || len(ins.Entries) != 1 {
				t.Fatalf("format %s with %d entries", ins.Format, len(ins.Entries))
			}
			e := ins.Entries[0]
			if strings.Join(e.Names, ",") != strings.Join(tc.names, ",") {
				t.Errorf("names %q, want %q", e.Names, tc.names)
			}
			if e.IsIndex() != isIndex {
				t.Errorf("IsIndex %v", e.IsIndex())
			}
			imgs := e.Images()
			if len(imgs) != tc.images {
				t.Fatalf("%d images, want %d", len(imgs), tc.images)
			}
			for _, ie := range append([]*winimage.Entry{e}, e.Manifests...) {
				if len(ie.Problems) > 0 {
					t.Errorf("problems: %q", ie.Problems)
				}
			}
			for _, ie := range imgs {
				if len(ie.Layers) != 2 || ie.Layers[0].DiffID == (v1.Hash{}) || ie.Layers[0].Missing {
					t.Errorf("layers %+v", ie.Layers)
				}
				if p := ie.Platform(); p == nil || p.OS != "windows" || p.OSVersion == "" {
					t.Errorf("platform %+v", p)
				}
			}
			best, err := e.Best(host(t, "10.0.20348"), "amd64")
			if err != nil {
				t.Fatal(err)
			}
			if best.Config.OSVersion != "10.0.20348.1" {
				t.Errorf("best for 20348 is %s", best.Config.OSVersion)
			}
			if _, err := e.Best(host(t, "10.0.14393"), "amd64"); err == nil {
				t.Errorf("an image was found for a 2016 host")
			}
		})
	}
}

// Best judges an image by the build its config names before its index
// entry's, as SelectImage and winimage/resolve do.
func TestInspectBestByImageBuild(t *testing.T) {
	dir := writeLayout(t, "example/pause:1.0", lyingIndex(t, pauseLikeImage(t, "10.0.17763.1"), pauseLikeImage(t, "10.0.20348.1")))
	ins, err := winimage.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ins.Entries) != 1 {
		t.Fatalf("%d entries", len(ins.Entries))
	}
	best, err := ins.Entries[0].Best(host(t, "10.0.20348"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if best.Config.OSVersion != "10.0.20348.1" {
		t.Errorf("best for 20348 is the image for %s", best.Config.OSVersion)
	}
	for _, img := range ins.Entries[0].Images() {
		if got := img.Platform().OSVersion; got != img.Config.OSVersion {
			t.Errorf("platform of the image for %s says %s", img.Config.OSVersion, got)
		}
	}
}

func TestInspectProblems(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")

	// The index says another os.version than the config.
	mismatch := writeLayout(t, "example/pause:1.0", img)
	editIndex(t, mismatch, func(im *v1.IndexManifest) { im.Manifests[0].Platform.OSVersion = "10.0.17763.1" })
	// A layer blob is missing.
	missing := writeLayout(t, "example/pause:1.0", img)
	m := mustManifest(t, img)
	if err := os.Remove(filepath.Join(missing, "blobs", "sha256", m.Layers[1].Digest.Hex)); err != nil {
		t.Fatal(err)
	}
	// The config lacks os.version.
	bare := writeLayout(t, "example/pause:1.0", withConfig(t, img, func(cf *v1.ConfigFile) { cf.OSVersion = "" }))

	for _, tc := range []struct {
		name, dir, want string
	}{
		{"os.version mismatch", mismatch, "the index says os.version 10.0.17763.1, the config 10.0.20348.1"},
		{"missing layer", missing, "missing"},
		{"no os.version", bare, "declares no os.version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins, err := winimage.Inspect(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			problems := strings.Join(ins.Entries[0].Problems, "; ")
			if !strings.Contains(problems, tc.want) {
				t.Errorf("problems %q, want one containing %q", problems, tc.want)
			}
		})
	}

	notImage := filepath.Join(t.TempDir(), "x.tar")
	if err := os.WriteFile(notImage, []byte("not a tar"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := winimage.Inspect(notImage); err == nil {
		t.Error("Inspect of a non-tar succeeded")
	}
	if _, err := winimage.Inspect(t.TempDir()); err == nil {
		t.Error("Inspect of an empty directory succeeded")
	}
}
