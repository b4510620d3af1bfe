package winimage_test

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
)

func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBuildConfig(t *testing.T) {
	for _, tc := range []struct {
		name               string
		cfg                winimage.Config
		wantOSV, wantArch  string
		wantEnt, wantCmd   []string
		wantEnv            []string
		wantWorkdir, wantU string
	}{
		{
			name:     "pause",
			cfg:      winimage.Config{OSVersion: "10.0.20348.1", Entrypoint: []string{`C:\pause.exe`}},
			wantOSV:  "10.0.20348.1",
			wantArch: "amd64",
			wantEnt:  []string{`C:\pause.exe`},
		},
		{
			name: "everything",
			cfg: winimage.Config{
				OSVersion: "10.0.17763.5329", Architecture: "arm64",
				Entrypoint: []string{`C:\app\app.exe`}, Cmd: []string{"-v"},
				Env: []string{`PATH=C:\Windows`, "A=1", `path=C:\app`}, WorkingDir: `C:\app`, User: "ContainerUser",
			},
			wantOSV: "10.0.17763.5329", wantArch: "arm64",
			wantEnt: []string{`C:\app\app.exe`}, wantCmd: []string{"-v"},
			wantEnv:     []string{`path=C:\app`, "A=1"},
			wantWorkdir: `C:\app`, wantU: "ContainerUser",
		},
		{
			name:    "revision added",
			cfg:     winimage.Config{OSVersion: "10.0.26100"},
			wantOSV: "10.0.26100.0", wantArch: "amd64",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := buildImage(t, tc.cfg, map[string]string{"a.txt": "a"})
			cf := mustConfig(t, img)
			if cf.OS != "windows" || cf.OSVersion != tc.wantOSV || cf.Architecture != tc.wantArch {
				t.Errorf("config platform %s/%s %s, want windows/%s %s", cf.OS, cf.Architecture, cf.OSVersion, tc.wantArch, tc.wantOSV)
			}
			c := cf.Config
			if !reflect.DeepEqual(c.Entrypoint, tc.wantEnt) || !reflect.DeepEqual(c.Cmd, tc.wantCmd) ||
				!reflect.DeepEqual(c.Env, tc.wantEnv) || c.WorkingDir != tc.wantWorkdir || c.User != tc.wantU {
				t.Errorf("config %+v", c)
			}
			if !cf.Created.Time.Equal(winimage.DefaultCreated) {
				t.Errorf("created %v", cf.Created)
			}
			if len(cf.History) != 2 || len(cf.RootFS.DiffIDs) != 2 || cf.RootFS.Type != "layers" {
				t.Errorf("history %d, diff_ids %d, rootfs type %q", len(cf.History), len(cf.RootFS.DiffIDs), cf.RootFS.Type)
			}
			m := mustManifest(t, img)
			if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
				t.Errorf("manifest %s, config %s", m.MediaType, m.Config.MediaType)
			}
			for _, l := range m.Layers {
				if l.MediaType != types.OCILayer {
					t.Errorf("layer media type %s", l.MediaType)
				}
			}
			// Written out, the index.json descriptor carries the platform.
			dir := t.TempDir() + "/layout"
			if err := winimage.WriteOCILayout(ctx, dir, "example/app:1", img); err != nil {
				t.Fatal(err)
			}
			var index v1.IndexManifest
			mustJSON(t, readFile(t, dir+"/index.json"), &index)
			p := index.Manifests[0].Platform
			if p == nil || p.OS != "windows" || p.Architecture != tc.wantArch || p.OSVersion != tc.wantOSV {
				t.Errorf("index.json platform %+v", p)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	l, err := winimage.SyntheticBaseLayer(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cfg    winimage.Config
		layers []v1.Layer
		want   string
	}{
		{"no layers", winimage.Config{OSVersion: "10.0.20348.1"}, nil, "at least one layer"},
		{"no os.version", winimage.Config{}, []v1.Layer{l}, "os.version is required"},
		{"bad os.version", winimage.Config{OSVersion: "ltsc2022"}, []v1.Layer{l}, "invalid Windows OS version"},
		{"bad arch", winimage.Config{OSVersion: "10.0.20348.1", Architecture: "386"}, []v1.Layer{l}, "architecture"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := winimage.Build(tc.cfg, tc.layers...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReproducible(t *testing.T) {
	files := map[string]string{"pause.exe": "MZ", "Windows/System32/wincat.exe": "MZ2"}
	build := func(created time.Time) v1.Image {
		// A fresh tree each time: other inodes and on-disk times.
		time.Sleep(10 * time.Millisecond)
		return buildImage(t, winimage.Config{OSVersion: "10.0.20348.1", Entrypoint: []string{`C:\pause.exe`}, Created: created}, files)
	}
	a, b := build(time.Time{}), build(time.Time{})
	if da, db := mustDigest(t, a), mustDigest(t, b); da != db {
		t.Fatalf("same inputs, different digests: %s, %s", da, db)
	}
	if dc := mustDigest(t, build(time.Unix(1700000000, 0))); dc == mustDigest(t, a) {
		t.Fatalf("a different created time gave the same digest")
	}
	// The archives are byte for byte the same, too.
	for _, f := range winimage.Formats() {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			pa, pb := dir+"/a", dir+"/b"
			if err := winimage.Write(ctx, pa, f, "example/pause:1", a); err != nil {
				t.Fatal(err)
			}
			if err := winimage.Write(ctx, pb, f, "example/pause:1", b); err != nil {
				t.Fatal(err)
			}
			if f == winimage.FormatOCILayout {
				pa, pb = pa+"/index.json", pb+"/index.json"
			}
			if string(readFile(t, pa)) != string(readFile(t, pb)) {
				t.Errorf("%s: two writes differ", f)
			}
		})
	}
}

func TestNewIndex(t *testing.T) {
	versions := []string{"10.0.17763.5329", "10.0.20348.2227", "10.0.26100.1"}
	var imgs []v1.Image
	for _, v := range versions {
		imgs = append(imgs, buildImage(t, winimage.Config{OSVersion: v, Entrypoint: []string{`C:\pause.exe`}}, map[string]string{"pause.exe": "MZ"}))
	}
	idx, err := winimage.NewIndex(imgs...)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != types.OCIImageIndex || len(im.Manifests) != len(versions) {
		t.Fatalf("index %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	var descs []ocispec.Descriptor
	for i, d := range im.Manifests {
		if d.Digest != mustDigest(t, imgs[i]) {
			t.Errorf("manifest %d: digest %s, want the image's", i, d.Digest)
		}
		p := d.Platform
		if p == nil || p.OS != "windows" || p.Architecture != "amd64" || p.OSVersion != versions[i] {
			t.Errorf("manifest %d: platform %+v, want windows/amd64 %s", i, p, versions[i])
		}
		if got := mustConfig(t, imgs[i]).OSVersion; got != versions[i] {
			t.Errorf("image %d: config os.version %s", i, got)
		}
		descs = append(descs, ocispec.Descriptor{Digest: digestString(d.Digest), MediaType: string(d.MediaType),
			Platform: &ocispec.Platform{OS: p.OS, Architecture: p.Architecture, OSVersion: p.OSVersion}})
	}
	// The index is what build matching needs: each host finds its build.
	for _, tc := range []struct {
		host string
		want int
	}{{"10.0.17763", 0}, {"10.0.20348", 1}, {"10.0.26100", 2}} {
		host, _ := winbuild.Parse(tc.host)
		d, err := winbuild.BestManifest(host, "amd64", descs)
		if err != nil {
			t.Errorf("host %s: %v", tc.host, err)
			continue
		}
		if d.Platform.OSVersion != versions[tc.want] {
			t.Errorf("host %s: chose %s, want %s", tc.host, d.Platform.OSVersion, versions[tc.want])
		}
	}

	if _, err := winimage.NewIndex(imgs[0], imgs[0]); err == nil {
		t.Error("an index with two images for the same build was made")
	}
	noVersion, err := mutate.ConfigFile(imgs[0], func() *v1.ConfigFile {
		cf := mustConfig(t, imgs[0]).DeepCopy()
		cf.OSVersion = ""
		return cf
	}())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := winimage.NewIndex(noVersion); err == nil {
		t.Error("an index with an image without os.version was made")
	}
	if _, err := winimage.NewIndex(); err == nil {
		t.Error("an empty index was made")
	}
}
