//go:build !linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Without Linux xattrs (Windows, under Wine in `make wine-test`), Import
// keeps metadata and whiteouts in the sidecar, and its file workers write
// every file with its data and times, small or spanning chunks.
func TestImportWithSidecar(t *testing.T) {
	small, large := []byte("hello"), bytes.Repeat([]byte("0123456789"), copyBufferSize/5+7)
	t1, t2 := time.Unix(1700000000, 0), time.Unix(1700003600, 500)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []struct {
		hdr  tar.Header
		data []byte
	}{
		{hdr: tar.Header{Name: "Files", Typeflag: tar.TypeDir, ModTime: t1}},
		{hdr: tar.Header{Name: "Files/a.txt", Typeflag: tar.TypeReg, ModTime: t1, PAXRecords: map[string]string{paxFileAttr: "33"}}, data: small},
		{hdr: tar.Header{Name: "Files/big.bin", Typeflag: tar.TypeReg, ModTime: t2}, data: large},
		{hdr: tar.Header{Name: "Files/.wh.gone", Typeflag: tar.TypeReg, ModTime: t1}},
	} {
		h.hdr.Size, h.hdr.Format = int64(len(h.data)), tar.FormatPAX
		if err := tw.WriteHeader(&h.hdr); err != nil {
			t.Fatal(err)
		}
		tw.Write(h.data)
	}
	tw.Close()

	dir := tempTree(t)
	n, err := Import(context.Background(), &buf, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(small)+len(large)) {
		t.Errorf("Import wrote %d bytes, want %d", n, len(small)+len(large))
	}
	for _, c := range []struct {
		name  string
		data  []byte
		mtime time.Time
	}{{"a.txt", small, t1}, {"big.bin", large, t2}} {
		p := filepath.Join(dir, "Files", c.name)
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, c.data) {
			t.Errorf("%s: %d bytes, %v; want %d", c.name, len(b), err, len(c.data))
		}
		if fi, err := os.Stat(p); err != nil || !fi.ModTime().Equal(c.mtime.Truncate(100*time.Nanosecond)) {
			t.Errorf("%s: mtime %v, %v; want %v", c.name, fi.ModTime(), err, c.mtime)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	side, err := loadSidecar(root)
	if err != nil || side == nil {
		t.Fatalf("sidecar: %v, %v", side, err)
	}
	if e := side.get("Files/a.txt"); e == nil || e.Records[paxFileAttr] != "33" {
		t.Errorf("sidecar records of a.txt: %+v", e)
	}
	if e := side.get("Files/gone"); e == nil || !e.Whiteout {
		t.Errorf("sidecar whiteout of gone: %+v", e)
	}
}

// tempTree is a temporary directory removed entry by entry, deepest first:
// under Wine Go's os.RemoveAll fails where os.Remove works.
func tempTree(t *testing.T) string {
	dir, err := os.MkdirTemp("", "layertar-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var paths []string
		filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
			paths = append(paths, p)
			return nil
		})
		for _, p := range slices.Backward(paths) {
			if err := os.Remove(p); err != nil {
				t.Errorf("remove %s: %v", p, err)
			}
		}
	})
	return dir
}
