package winimage_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/winproc/winproc/winimage"
)

func pauseLikeImage(t *testing.T, osVersion string) v1.Image {
	t.Helper()
	return buildImage(t, winimage.Config{OSVersion: osVersion, Entrypoint: []string{`C:\pause.exe`}},
		map[string]string{"pause.exe": "MZ pause"})
}

func TestDockerArchive(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")
	p := filepath.Join(t.TempDir(), "pause.tar")
	if err := winimage.Write(ctx, p, winimage.FormatDockerArchive, "example/pause:1.0", img); err != nil {
		t.Fatal(err)
	}
	_, files := readTarFile(t, p)
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	mustJSON(t, files["manifest.json"], &manifest)
	if len(manifest) != 1 {
		t.Fatalf("manifest.json has %d entries", len(manifest))
	}
	m := manifest[0]
	if !reflect.DeepEqual(m.RepoTags, []string{"example/pause:1.0"}) {
		t.Errorf("RepoTags %q", m.RepoTags)
	}
	cfgData, ok := files[m.Config]
	if !ok {
		t.Fatalf("config %q not in the archive", m.Config)
	}
	cfgName, _ := img.ConfigName()
	if sha256Hex(cfgData) != cfgName.Hex {
		t.Errorf("config file is not the image's config")
	}
	var cf v1.ConfigFile
	mustJSON(t, cfgData, &cf)
	if cf.OS != "windows" || cf.OSVersion != "10.0.20348.1" || cf.Architecture != "amd64" {
		t.Errorf("config platform %s/%s %s", cf.OS, cf.Architecture, cf.OSVersion)
	}
	if len(m.Layers) != 2 || len(cf.RootFS.DiffIDs) != 2 {
		t.Fatalf("%d layers, %d diff_ids", len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	for i, name := range m.Layers {
		data, ok := files[name]
		if !ok {
			t.Fatalf("layer %q not in the archive", name)
		}
		ents := gunzipEntries(t, data)
		if len(ents) == 0 || ents[0].hdr.Name != "Files" {
			t.Errorf("layer %d does not start with Files: %q", i, entryNames(ents))
		}
		uncompressed := readAll(t, gzipReader(t, data))
		if sha256Hex(uncompressed) != cf.RootFS.DiffIDs[i].Hex {
			t.Errorf("layer %d does not match diff_id %s", i, cf.RootFS.DiffIDs[i])
		}
	}
}

func TestDockerArchiveErrors(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")
	idx, err := winimage.NewIndex(img)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		ref  string
		a    winimage.Artifact
		want string
	}{
		{"index", "example/x:1", idx, "not an index"},
		{"no ref", "", img, "needs an image reference"},
		{"digest ref", "example/x@sha256:" + strings.Repeat("a", 64), img, "not a digest"},
		{"bad ref", "Example/X:1", img, "invalid image reference"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".tar")
			err := winimage.Write(ctx, p, winimage.FormatDockerArchive, tc.ref, tc.a)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(p); err == nil {
				t.Errorf("%s was written", p)
			}
		})
	}
	if err := winimage.Write(ctx, filepath.Join(dir, "x"), "tarball", "example/x:1", img); err == nil {
		t.Error("an unknown format was written")
	}
	// Nothing left behind (temporary files).
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left in the output directory: %v", ents)
	}
}

// checkOCILayout checks the files of an OCI layout (from a directory or a
// tar) holding a named artifact whose digest is want, and returns the
// index.json descriptor.
func checkOCILayout(t *testing.T, files map[string][]byte, want v1.Hash) v1.Descriptor {
	t.Helper()
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout %q", files["oci-layout"])
	}
	var index v1.IndexManifest
	mustJSON(t, files["index.json"], &index)
	if index.SchemaVersion != 2 || index.MediaType != types.OCIImageIndex || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s", files["index.json"])
	}
	d := index.Manifests[0]
	if d.Digest != want {
		t.Errorf("index.json names %s, want %s", d.Digest, want)
	}
	wantAnns := map[string]string{
		"io.containerd.image.name":          "docker.io/example/pause:1.0",
		"org.opencontainers.image.ref.name": "1.0",
	}
	if !reflect.DeepEqual(d.Annotations, wantAnns) {
		t.Errorf("annotations %v, want %v", d.Annotations, wantAnns)
	}
	// Every blob is there under its digest, and everything referenced is
	// there.
	for name, data := range files {
		if hex, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && hex != "" {
			if sha256Hex(data) != hex {
				t.Errorf("%s: content does not match its name", name)
			}
		}
	}
	var walk func(d v1.Descriptor)
	walk = func(d v1.Descriptor) {
		data, ok := files["blobs/sha256/"+d.Digest.Hex]
		if !ok {
			t.Errorf("blob %s missing", d.Digest)
			return
		}
		if int64(len(data)) != d.Size {
			t.Errorf("blob %s: %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
		}
		switch {
		case d.MediaType.IsIndex():
			var im v1.IndexManifest
			mustJSON(t, data, &im)
			for _, c := range im.Manifests {
				walk(c)
			}
		case d.MediaType.IsImage():
			var m v1.Manifest
			mustJSON(t, data, &m)
			walk(m.Config)
			for _, l := range m.Layers {
				walk(l)
			}
		}
	}
	walk(d)
	return d
}

func TestOCIArchiveAndLayout(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")
	idx, err := winimage.NewIndex(pauseLikeImage(t, "10.0.17763.1"), img)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		a            winimage.Artifact
		wantPlatform bool
	}{
		{"image", img, true},
		{"index", idx, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tarPath, layoutDir := filepath.Join(dir, "out.tar"), filepath.Join(dir, "layout")
			if err := winimage.Write(ctx, tarPath, winimage.FormatOCIArchive, "example/pause:1.0", tc.a); err != nil {
				t.Fatal(err)
			}
			if err := winimage.Write(ctx, layoutDir, winimage.FormatOCILayout, "example/pause:1.0", tc.a); err != nil {
				t.Fatal(err)
			}
			ents, tarFiles := readTarFile(t, tarPath)
			if ents[0].hdr.Name != "oci-layout" || ents[1].hdr.Name != "index.json" {
				t.Errorf("archive starts with %q", entryNames(ents[:2]))
			}
			d := checkOCILayout(t, tarFiles, mustDigest(t, tc.a))
			if got := d.Platform != nil; got != tc.wantPlatform {
				t.Errorf("index.json platform %+v", d.Platform)
			} else if got && (d.Platform.OS != "windows" || d.Platform.OSVersion != "10.0.20348.1") {
				t.Errorf("index.json platform %+v", d.Platform)
			}

			// The directory holds the same files.
			dirFiles := map[string][]byte{}
			err := filepath.WalkDir(layoutDir, func(p string, de os.DirEntry, err error) error {
				if err != nil || de.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(layoutDir, p)
				dirFiles[filepath.ToSlash(rel)] = readFile(t, p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dirFiles, tarFiles) {
				t.Errorf("layout directory and archive differ: %d and %d files", len(dirFiles), len(tarFiles))
			}
		})
	}
}

func TestOCILayoutDirectoryRules(t *testing.T) {
	img := pauseLikeImage(t, "10.0.20348.1")
	dir := t.TempDir()
	// An existing empty directory is fine.
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := winimage.WriteOCILayout(ctx, empty, "", img); err != nil {
		t.Fatal(err)
	}
	// Unnamed: no annotations.
	var index v1.IndexManifest
	mustJSON(t, readFile(t, filepath.Join(empty, "index.json")), &index)
	if len(index.Manifests[0].Annotations) != 0 {
		t.Errorf("unnamed image has annotations %v", index.Manifests[0].Annotations)
	}
	// A non-empty one is not.
	if err := winimage.WriteOCILayout(ctx, empty, "", img); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("writing into a non-empty directory: %v", err)
	}
	// A failed write removes the directory it created, or what it wrote
	// into an empty one.
	corrupt, err := mutate.AppendLayers(img, corruptLayer{mustLayers(t, img)[1]})
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	if err := winimage.WriteOCILayout(ctx, bad, "Not A Ref", img); err == nil {
		t.Error("an invalid reference was accepted")
	}
	err = winimage.WriteOCILayout(ctx, bad, "", corrupt)
	if err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Errorf("writing a corrupt layer: %v", err)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Errorf("%s left behind", bad)
	}
	emptyToo := filepath.Join(dir, "empty2")
	if err := os.Mkdir(emptyToo, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := winimage.WriteOCILayout(ctx, emptyToo, "", corrupt); err == nil {
		t.Error("a corrupt layer was written")
	}
	if ents, err := os.ReadDir(emptyToo); err != nil || len(ents) != 0 {
		t.Errorf("after a failed write into an empty directory: %v, %v", ents, err)
	}
	// Archives are checked the same way, and not left behind.
	arch := filepath.Join(dir, "corrupt.tar")
	if err := winimage.Write(ctx, arch, winimage.FormatOCIArchive, "", corrupt); err == nil {
		t.Error("a corrupt layer was written to an archive")
	}
	if _, err := os.Stat(arch); err == nil {
		t.Errorf("%s left behind", arch)
	}
}

// corruptLayer is a layer whose compressed content does not match its
// digest (same size, one byte changed).
type corruptLayer struct{ v1.Layer }

func (l corruptLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, err
	}
	b[len(b)/2] ^= 0xff
	return io.NopCloser(bytes.NewReader(b)), nil
}
