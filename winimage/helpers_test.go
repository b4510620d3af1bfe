package winimage_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	digest "github.com/opencontainers/go-digest"

	"github.com/winproc/winproc/winimage"
)

var ctx = context.Background()

// writeTree creates files (relative slash paths -> content; a name ending
// in "/" is a directory) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// tarEntry is an entry of a tar read back.
type tarEntry struct {
	hdr  *tar.Header
	body []byte
}

func readTarBytes(t *testing.T, r io.Reader) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarEntry{hdr: hdr, body: body})
	}
}

// readTarFile reads the tar file p: entries in order and by name.
func readTarFile(t *testing.T, p string) ([]tarEntry, map[string][]byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ents := readTarBytes(t, f)
	byName := make(map[string][]byte, len(ents))
	for _, e := range ents {
		if e.hdr.Typeflag == tar.TypeReg {
			byName[e.hdr.Name] = e.body
		}
	}
	return ents, byName
}

// layerEntries returns the entries of a layer's uncompressed tar, after
// checking that its compressed form is gzip.
func layerEntries(t *testing.T, l v1.Layer) []tarEntry {
	t.Helper()
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	zr, err := gzip.NewReader(rc)
	if err != nil {
		t.Fatalf("layer is not gzip: %v", err)
	}
	return readTarBytes(t, zr)
}

func gunzipEntries(t *testing.T, data []byte) []tarEntry {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("layer is not gzip: %v", err)
	}
	return readTarBytes(t, zr)
}

func entryNames(ents []tarEntry) []string {
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.hdr.Name
	}
	return names
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("unmarshal %s: %v", data, err)
	}
}

func mustDigest(t *testing.T, a interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	d, err := a.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustConfig(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func mustLayers(t *testing.T, img v1.Image) []v1.Layer {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func mustManifest(t *testing.T, img v1.Image) *v1.Manifest {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// buildImage builds a small image: the synthetic base plus one layer of
// files.
func buildImage(t *testing.T, cfg winimage.Config, files map[string]string) v1.Image {
	t.Helper()
	base, err := winimage.SyntheticBaseLayer(ctx, cfg.Created)
	if err != nil {
		t.Fatal(err)
	}
	l, err := winimage.LayerFromTree(ctx, writeTree(t, files), winimage.WithCreated(createdOr(cfg.Created)))
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Build(cfg, base, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func createdOr(t time.Time) time.Time {
	if t.IsZero() {
		return winimage.DefaultCreated
	}
	return t
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func digestString(h v1.Hash) digest.Digest { return digest.Digest(h.String()) }

func gzipReader(t *testing.T, data []byte) io.Reader {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}
