package winimage_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
)

// fakeNanoserver builds a stand-in for an operator's base image.
func fakeNanoserver(t *testing.T, osVersion string) v1.Image {
	t.Helper()
	return buildImage(t, winimage.Config{
		OSVersion:  osVersion,
		Cmd:        []string{`c:\windows\system32\cmd.exe`},
		Env:        []string{`PATH=C:\Windows\System32`, "FOO=1"},
		WorkingDir: `C:\`,
		User:       "ContainerUser",
		Labels:     map[string]string{"base": "yes"},
	}, map[string]string{"Windows/System32/cmd.exe": "MZ cmd", "Windows/System32/osversion-" + osVersion: ""})
}

func host(t *testing.T, s string) winbuild.Version {
	t.Helper()
	v, err := winbuild.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func writeLayout(t *testing.T, ref string, a winimage.Artifact) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	if err := winimage.WriteOCILayout(ctx, dir, ref, a); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestAppendKeepsBase(t *testing.T) {
	versions := []string{"10.0.17763.5329", "10.0.20348.2227"}
	var bases []v1.Image
	for _, v := range versions {
		bases = append(bases, fakeNanoserver(t, v))
	}
	idx, err := winimage.NewIndex(bases...)
	if err != nil {
		t.Fatal(err)
	}
	dir := writeLayout(t, "mcr.microsoft.com/windows/nanoserver:fake", idx)
	for i, hostBuild := range []string{"10.0.17763", "10.0.20348"} {
		t.Run(hostBuild, func(t *testing.T) {
			base, err := winimage.LoadBase(dir, host(t, hostBuild), "amd64", "")
			if err != nil {
				t.Fatal(err)
			}
			if mustDigest(t, base) != mustDigest(t, bases[i]) {
				t.Fatalf("LoadBase chose %s, want the %s image", mustDigest(t, base), versions[i])
			}
			layer, err := winimage.LayerFromTree(ctx, writeTree(t, map[string]string{"pause.exe": "MZ"}))
			if err != nil {
				t.Fatal(err)
			}
			img, err := winimage.Append(base, winimage.Config{
				Entrypoint: []string{`C:\pause.exe`},
				Env:        []string{`Path=C:\Windows\system32;C:\Windows;`},
				Labels:     map[string]string{"pause": "yes"},
			}, layer)
			if err != nil {
				t.Fatal(err)
			}
			cf := mustConfig(t, img)
			if cf.OS != "windows" || cf.OSVersion != versions[i] || cf.Architecture != "amd64" {
				t.Errorf("platform %s/%s %s, want the base's %s", cf.OS, cf.Architecture, cf.OSVersion, versions[i])
			}
			baseLayers, layers := mustLayers(t, base), mustLayers(t, img)
			if len(layers) != len(baseLayers)+1 {
				t.Fatalf("%d layers, want %d", len(layers), len(baseLayers)+1)
			}
			for j, bl := range baseLayers {
				if mustDigest(t, bl) != mustDigest(t, layers[j]) {
					t.Errorf("layer %d is not the base's", j)
				}
			}
			if mustDigest(t, layers[len(layers)-1]) != mustDigest(t, layer) {
				t.Errorf("top layer is not the added one")
			}
			if len(cf.RootFS.DiffIDs) != len(layers) || len(cf.History) != len(layers) {
				t.Errorf("%d diff_ids and %d history entries for %d layers", len(cf.RootFS.DiffIDs), len(cf.History), len(layers))
			}
			c := cf.Config
			if !reflect.DeepEqual(c.Entrypoint, []string{`C:\pause.exe`}) || c.Cmd != nil {
				t.Errorf("entrypoint %q cmd %q: want the new entrypoint and no cmd", c.Entrypoint, c.Cmd)
			}
			if want := []string{`Path=C:\Windows\system32;C:\Windows;`, "FOO=1"}; !reflect.DeepEqual(c.Env, want) {
				t.Errorf("env %q, want %q", c.Env, want)
			}
			if want := map[string]string{"base": "yes", "pause": "yes"}; !reflect.DeepEqual(c.Labels, want) {
				t.Errorf("labels %v, want %v", c.Labels, want)
			}
			if c.WorkingDir != `C:\` || c.User != "ContainerUser" {
				t.Errorf("workdir %q user %q: not the base's", c.WorkingDir, c.User)
			}
			// Written out, the descriptor carries the base's os.version.
			out := writeLayout(t, "example/pause:1.0", img)
			var index v1.IndexManifest
			mustJSON(t, readFile(t, filepath.Join(out, "index.json")), &index)
			if p := index.Manifests[0].Platform; p == nil || p.OSVersion != versions[i] {
				t.Errorf("descriptor platform %+v", p)
			}
		})
	}
}

func TestAppendErrors(t *testing.T) {
	base := fakeNanoserver(t, "10.0.20348.2227")
	noVersion := withConfig(t, base, func(cf *v1.ConfigFile) { cf.OSVersion = "" })
	linux := withConfig(t, base, func(cf *v1.ConfigFile) { cf.OS = "linux" })
	for _, tc := range []struct {
		name string
		base v1.Image
		cfg  winimage.Config
		want string
	}{
		{"other build", base, winimage.Config{OSVersion: "10.0.17763.1"}, "is for os.version 10.0.20348.2227"},
		{"other revision", base, winimage.Config{OSVersion: "10.0.20348.1"}, "is for os.version"},
		{"other arch", base, winimage.Config{Architecture: "arm64"}, "architecture"},
		{"linux", linux, winimage.Config{}, "not windows"},
		{"no os.version anywhere", noVersion, winimage.Config{}, "declares no os.version"},
		{"bad os.version", base, winimage.Config{OSVersion: "x"}, "invalid Windows OS version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := winimage.Append(tc.base, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The same version, written differently, is fine; a base without
	// os.version gets the given one.
	for _, tc := range []struct {
		base      v1.Image
		osVersion string
		want      string
	}{
		{base, "10.0.20348.2227", "10.0.20348.2227"},
		{base, "", "10.0.20348.2227"},
		{noVersion, "10.0.20348", "10.0.20348.0"},
	} {
		img, err := winimage.Append(tc.base, winimage.Config{OSVersion: tc.osVersion})
		if err != nil {
			t.Errorf("Append(os.version %q): %v", tc.osVersion, err)
			continue
		}
		if got := mustConfig(t, img).OSVersion; got != tc.want {
			t.Errorf("Append(os.version %q): os.version %s, want %s", tc.osVersion, got, tc.want)
		}
	}
}

func withConfig(t *testing.T, img v1.Image, f func(*v1.ConfigFile)) v1.Image {
	t.Helper()
	cf := mustConfig(t, img).DeepCopy()
	f(cf)
	out, err := mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAppendDockerBase(t *testing.T) {
	base := mutate.ConfigMediaType(mutate.MediaType(fakeNanoserver(t, "10.0.20348.2227"), types.DockerManifestSchema2), types.DockerConfigJSON)
	layer, err := winimage.LayerFromTree(ctx, writeTree(t, map[string]string{"pause.exe": "MZ"}))
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Append(base, winimage.Config{}, layer)
	if err != nil {
		t.Fatal(err)
	}
	m := mustManifest(t, img)
	if m.MediaType != types.DockerManifestSchema2 {
		t.Errorf("manifest media type %s", m.MediaType)
	}
	if got := m.Layers[len(m.Layers)-1].MediaType; got != types.DockerLayer {
		t.Errorf("added layer media type %s, want %s", got, types.DockerLayer)
	}
	// And it round-trips through a layout.
	dir := writeLayout(t, "example/pause:1.0", img)
	if _, err := winimage.LoadBase(dir, host(t, "10.0.20348"), "", ""); err != nil {
		t.Errorf("LoadBase of a Docker-format image: %v", err)
	}
}

func TestLoadBaseSelection(t *testing.T) {
	imgs := map[string]v1.Image{}
	var list []v1.Image
	for _, v := range []string{"10.0.17763.5329", "10.0.20348.1", "10.0.20348.2227"} {
		imgs[v] = fakeNanoserver(t, v)
		list = append(list, imgs[v])
	}
	idx, err := winimage.NewIndex(list...)
	if err != nil {
		t.Fatal(err)
	}
	multi := writeLayout(t, "example/base:multi", idx)
	single := writeLayout(t, "example/base:single", imgs["10.0.17763.5329"])

	// A layout whose index.json entry has no platform (some tools write
	// that): the config says.
	noPlatform := writeLayout(t, "example/base:np", imgs["10.0.20348.1"])
	editIndex(t, noPlatform, func(im *v1.IndexManifest) { im.Manifests[0].Platform = nil })

	// Two named images in one layout.
	two := writeLayout(t, "example/a:1", imgs["10.0.20348.1"])
	mergeLayout(t, two, writeLayout(t, "example/b:1", imgs["10.0.20348.2227"]))

	// An index entry that declares an os.version its config lacks.
	bare := withConfig(t, imgs["10.0.20348.2227"], func(cf *v1.ConfigFile) { cf.OSVersion = "" })
	bareIdx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), mutate.IndexAddendum{
		Add:        bare,
		Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.2227"}},
	})
	descOnly := writeLayout(t, "example/base:desc", bareIdx)

	// An index entry that names a build its config contradicts: the
	// config's is the image's (winbuild.ImageOSVersion).
	lying := writeLayout(t, "example/base:lying", lyingIndex(t, imgs["10.0.17763.5329"], imgs["10.0.20348.1"]))

	for _, tc := range []struct {
		name, dir, host, ref string
		want                 string // os.version of the chosen image, or an error substring
		wantErr              bool
	}{
		{"ltsc2019 host", multi, "10.0.17763", "", "10.0.17763.5329", false},
		{"ltsc2022 host: latest revision", multi, "10.0.20348", "", "10.0.20348.2227", false},
		{"2016 host: nothing", multi, "10.0.14393", "", "can run on this host", true},
		{"single matching", single, "10.0.17763", "", "10.0.17763.5329", false},
		{"single not matching", single, "10.0.20348", "", "can run on this host", true},
		{"no platform in index.json", noPlatform, "10.0.20348", "", "10.0.20348.1", false},
		{"two images, no ref", two, "10.0.20348", "", "several images", true},
		{"two images, ref", two, "10.0.20348", "example/b:1", "10.0.20348.2227", false},
		{"two images, full ref", two, "10.0.20348", "docker.io/example/a:1", "10.0.20348.1", false},
		{"two images, unknown ref", two, "10.0.20348", "example/c:1", "no image named", true},
		{"os.version from the descriptor", descOnly, "10.0.20348", "", "10.0.20348.2227", false},
		{"the config's os.version before the entry's", lying, "10.0.20348", "", "10.0.20348.1", false},
		{"not a layout", t.TempDir(), "10.0.20348", "", "base layout", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img, err := winimage.LoadBase(tc.dir, host(t, tc.host), "amd64", tc.ref)
			if tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mustConfig(t, img).OSVersion; got != tc.want {
				t.Errorf("chose os.version %s, want %s", got, tc.want)
			}
		})
	}
}

// lyingIndex is an index of lying, whose entry says 10.0.20348.9999
// whatever its config says, and honest, whose entry says its config's.
func lyingIndex(t *testing.T, lying, honest v1.Image) v1.ImageIndex {
	t.Helper()
	cf := mustConfig(t, honest)
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex),
		mutate.IndexAddendum{Add: lying, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.9999"}}},
		mutate.IndexAddendum{Add: honest, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "windows", Architecture: "amd64", OSVersion: cf.OSVersion}}},
	)
}

func editIndex(t *testing.T, dir string, f func(*v1.IndexManifest)) {
	t.Helper()
	p := filepath.Join(dir, "index.json")
	var im v1.IndexManifest
	mustJSON(t, readFile(t, p), &im)
	f(&im)
	b, err := json.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mergeLayout adds the blobs and index.json entries of layout src to dst.
func mergeLayout(t *testing.T, dst, src string) {
	t.Helper()
	blobs, err := os.ReadDir(filepath.Join(src, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blobs {
		to := filepath.Join(dst, "blobs", "sha256", b.Name())
		if _, err := os.Stat(to); err == nil {
			continue
		}
		if err := os.WriteFile(to, readFile(t, filepath.Join(src, "blobs", "sha256", b.Name())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var other v1.IndexManifest
	mustJSON(t, readFile(t, filepath.Join(src, "index.json")), &other)
	editIndex(t, dst, func(im *v1.IndexManifest) { im.Manifests = append(im.Manifests, other.Manifests...) })
}
