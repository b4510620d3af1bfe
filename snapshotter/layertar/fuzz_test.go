//go:build linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// fuzzRoot returns the directory the executions of f make their layers in.
// An execution creates and removes a few dozen files; on a disk file system
// that is most of its time, so a tmpfs is used when there is one that takes
// user xattrs (the importer then follows the same paths as on disk).
func fuzzRoot(f *testing.F) string {
	if d, err := os.MkdirTemp("/dev/shm", "layertar-fuzz-"); err == nil {
		if unix.Setxattr(d, "user.probe", []byte("1"), 0) == nil {
			f.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
		os.RemoveAll(d)
	}
	return f.TempDir()
}

// fuzzSandbox is sandbox under root: one directory per execution instead
// of t.TempDir's two.
func fuzzSandbox(t *testing.T, root string) (parent, dir string) {
	t.Helper()
	parent, err := os.MkdirTemp(root, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.WriteFile(filepath.Join(parent, "sentinel"), []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return parent, filepath.Join(parent, "layer")
}

// checkRoundTrip checks that the layer Import wrote to dir (n data bytes)
// exports, re-imports with the same data and exports again identically.
// The second layer goes next to the first, in parent.
func checkRoundTrip(t *testing.T, parent, dir string, n int64) {
	t.Helper()
	ctx := context.Background()
	var out1 bytes.Buffer
	if err := Export(ctx, &out1, dir); err != nil {
		t.Fatalf("exporting an imported layer: %v", err)
	}
	dir2 := filepath.Join(parent, "again")
	n2, err := Import(ctx, bytes.NewReader(out1.Bytes()), dir2)
	if err != nil {
		t.Fatalf("re-importing an export: %v", err)
	}
	// Everything Import counts (Files/ and Hives/ data) is exported.
	if n2 != n {
		t.Fatalf("import wrote %d data bytes, re-importing its export %d", n, n2)
	}
	var out2 bytes.Buffer
	if err := Export(ctx, &out2, dir2); err != nil {
		t.Fatalf("exporting again: %v", err)
	}
	if !bytes.Equal(out1.Bytes(), out2.Bytes()) {
		t.Fatalf("export -> import -> export is not stable:\n%q\n%q", names(readTar(t, out1.Bytes())), names(readTar(t, out2.Bytes())))
	}
}

// fuzzSeeds are small valid and broken layer tars.
func fuzzSeeds(t testing.TB) [][]byte {
	small := []tEntry{
		{name: "Files", typ: tar.TypeDir, pax: map[string]string{paxFileAttr: "16", paxRawSD: testSD(18)}},
		{name: "Files/a/b.txt", body: []byte("hello"), pax: map[string]string{paxFileAttr: "32", paxCreationTime: "1.5"}},
		{name: "Files/a/b.txt:s", body: []byte("stream")},
		{name: "Files/a/c.txt", typ: tar.TypeLink, link: "Files/a/b.txt"},
		{name: "Files/l", typ: tar.TypeSymlink, link: `C:\a`, pax: map[string]string{paxMountPoint: "1"}},
		{name: "Files/.wh.gone"},
		{name: "Files/.wh.a"},
		{name: "Files/o/.wh..wh..opq"},
		{name: "Hives/SOFTWARE_BASE", body: []byte("regf")},
		{name: "UtilityVM/Files/x", body: []byte("uvm")},
	}
	valid := buildTar(t, small)
	seeds := [][]byte{
		valid,
		valid[:len(valid)/2],
		valid[:700],
		nil,
		make([]byte, 1024),
		buildTar(t, []tEntry{{name: "../evil", body: []byte("x")}}),
		buildTar(t, []tEntry{{name: "Files/s", typ: tar.TypeSymlink, link: "sub"}, {name: "Files/sub", typ: tar.TypeDir}, {name: "Files/s/x", body: []byte("x")}}),
		buildTar(t, []tEntry{{name: "Files/x", body: []byte("x")}, {name: "Files/l", typ: tar.TypeLink, link: "../../x"}}),
		buildTar(t, []tEntry{{name: "Files/x", pax: map[string]string{paxRawSD: "!!"}}}),
		buildTar(t, []tEntry{{name: "Files/x", pax: map[string]string{paxFileAttr: "x"}}}),
		buildTar(t, []tEntry{{name: "Files/x", size: 1 << 40}}),
		buildTar(t, []tEntry{{name: `C:\x`, body: []byte("x")}}),
	}
	return seeds
}

// FuzzImport checks that Import never panics nor writes outside the layer
// directory, and that whatever it accepts exports and re-imports stably.
func FuzzImport(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	root := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		parent, dir := fuzzSandbox(t, root)
		n, err := Import(context.Background(), bytes.NewReader(data), dir, WithMaxEntrySize(1<<20))
		checkSandbox(t, parent)
		// File data comes from the archive: a declared size alone must not
		// make the importer write (or allocate) more than it was given.
		if n > int64(len(data)) {
			t.Fatalf("Import of %d bytes reports %d data bytes written", len(data), n)
		}
		if err != nil {
			var ee *EntryError
			if !errors.As(err, &ee) && !errors.Is(err, ErrCorruptArchive) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		checkRoundTrip(t, parent, dir, n)
	})
}

// FuzzImportEntries builds well-formed tars from fuzzed names, link targets
// and types, so that the fuzzer explores the path, link and whiteout logic
// rather than tar checksums. Same properties as FuzzImport.
func FuzzImportEntries(f *testing.F) {
	f.Add("Files/a", byte(0), "", "Files/b", byte(3), "Files/a", "Files/.wh.c", byte(0), "", paxFileAttr, "33")
	f.Add("Files/d", byte(1), "", "Files/s", byte(2), "d", "Files/s/x", byte(0), "", paxRawSD, testSD(1))
	f.Add("Files/.wh.d", byte(0), "", "Files/d/x", byte(0), "", "Files/d:s", byte(0), "", paxCreationTime, "-1.5")
	f.Add("Files/a", byte(0), "", "Files/a:s", byte(0), "s", "Files/l", byte(3), "Files/a", paxEAPrefix+"ea", "AAEC")
	f.Add("Hives/h", byte(0), "", "Files/o/.wh..wh..opq", byte(0), "", "Files/o", byte(1), "", "atime", "12.5")
	root := fuzzRoot(f)
	f.Fuzz(func(t *testing.T, n1 string, t1 byte, l1 string, n2 string, t2 byte, l2 string, n3 string, t3 byte, l3 string, pk, pv string) {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		types := []byte{tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeReg}
		for _, e := range []struct {
			name string
			typ  byte
			link string
		}{{n1, t1, l1}, {n2, t2, l2}, {n3, t3, l3}} {
			typ := types[int(e.typ)%len(types)]
			hdr := &tar.Header{Format: tar.FormatPAX, Name: e.name, Typeflag: typ, Linkname: e.link, ModTime: baseTime}
			if typ == tar.TypeReg {
				hdr.Size = int64(len(e.link))
				if int(e.typ)%len(types) == 4 {
					hdr.PAXRecords = map[string]string{paxFileAttr: "32", paxRawSD: testSD(18)}
				}
			}
			if typ != tar.TypeSymlink && typ != tar.TypeLink {
				hdr.Linkname = ""
			}
			if e.name == n1 && pk != "" && !basicKeys[pk] {
				if hdr.PAXRecords == nil {
					hdr.PAXRecords = map[string]string{}
				}
				hdr.PAXRecords[pk] = pv
			}
			if err := tw.WriteHeader(hdr); err != nil {
				t.Skip()
			}
			if typ == tar.TypeReg {
				tw.Write([]byte(e.link))
			}
		}
		if err := tw.Close(); err != nil {
			t.Skip()
		}
		data := buf.Bytes()

		parent, dir := fuzzSandbox(t, root)
		n, err := Import(context.Background(), bytes.NewReader(data), dir)
		checkSandbox(t, parent)
		if err != nil {
			var ee *EntryError
			if !errors.As(err, &ee) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		checkRoundTrip(t, parent, dir, n)
	})
}

// basicKeys are PAX keys archive/tar.Writer derives from Header fields.
var basicKeys = map[string]bool{"path": true, "linkpath": true, "size": true, "uid": true, "gid": true, "uname": true, "gname": true, "mtime": true, "atime": true, "ctime": true}
