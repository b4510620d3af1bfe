//go:build linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func getxattr(t *testing.T, path, name string) (string, bool) {
	t.Helper()
	buf := make([]byte, 64<<10)
	n, err := unix.Lgetxattr(path, name, buf)
	if errors.Is(err, unix.ENODATA) {
		return "", false
	}
	if err != nil {
		t.Fatalf("getxattr %s %s: %v", path, name, err)
	}
	return string(buf[:n]), true
}

func isWhiteoutAt(t *testing.T, path string) bool {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	return isWhiteout(fi)
}

func TestImportLayout(t *testing.T) {
	parent, dir := sandbox(t)
	n := importBytes(t, buildTar(t, sampleLayer()), dir)
	checkSandbox(t, parent)
	if want := sampleSize(); n != want {
		t.Errorf("size = %d, want %d", n, want)
	}
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }

	if b, err := os.ReadFile(p("Files/Windows/win.ini")); err != nil || string(b) != "[fonts]\r\n" {
		t.Errorf("win.ini = %q, %v", b, err)
	}
	// PAX records as user xattrs, verbatim.
	if v, _ := getxattr(t, p("Files/Windows/win.ini"), "user.MSWINDOWS.fileattr"); v != "33" {
		t.Errorf("fileattr xattr = %q", v)
	}
	if v, _ := getxattr(t, p("Files/Windows/win.ini"), "user.MSWINDOWS.rawsd"); v != testSD(544) {
		t.Errorf("rawsd xattr = %q", v)
	}
	if v, _ := getxattr(t, p("Files/Windows/win.ini"), "user.LIBARCHIVE.creationtime"); v != "1500000000.25" {
		t.Errorf("creationtime xattr = %q", v)
	}
	if v, _ := getxattr(t, p("Files/Windows/win.ini"), "user.MSWINDOWS.future"); v != "kept verbatim" {
		t.Errorf("unknown record xattr = %q", v)
	}
	if v, _ := getxattr(t, p("Files/Windows/win.ini"), "user.layertar.atime"); v != "1700000100.000000005" {
		t.Errorf("atime xattr = %q", v)
	}
	// Symlinks: trusted.* and the target with backslashes.
	if v, _ := getxattr(t, p("Files/Documents and Settings"), "trusted.MSWINDOWS.mountpoint"); v != "1" {
		t.Errorf("mountpoint xattr = %q", v)
	}
	if target, _ := os.Readlink(p("Files/Documents and Settings")); target != `C:\Users` {
		t.Errorf("junction target = %q", target)
	}
	if target, _ := os.Readlink(p("Files/Users/Public/link.txt")); target != `..\..\Windows\win.ini` {
		t.Errorf("symlink target = %q", target)
	}
	// mtimes.
	if fi, _ := os.Stat(p("Files/Windows")); !fi.ModTime().Equal(time.Unix(1650000000, 42)) {
		t.Errorf("dir mtime = %v", fi.ModTime())
	}
	if fi, _ := os.Stat(p("Files/Windows/win.ini")); !fi.ModTime().Equal(baseTime) {
		t.Errorf("file mtime = %v", fi.ModTime())
	}
	// Hard link shares the inode.
	a, _ := os.Stat(p("Files/Windows/win.ini"))
	b, _ := os.Stat(p("Files/Windows/hard.ini"))
	if !os.SameFile(a, b) {
		t.Error("hard.ini is not a hard link of win.ini")
	}
	// Alternate data stream.
	if b, _ := os.ReadFile(p("Files/Windows/win.ini:Zone.Identifier")); !bytes.Contains(b, []byte("ZoneId=3")) {
		t.Errorf("ADS = %q", b)
	}
	// Whiteouts and opaque directories.
	for _, w := range []string{"Files/deleted.txt", "Files/Program Files/OldApp"} {
		if !isWhiteoutAt(t, p(w)) {
			t.Errorf("%s is not a 0/0 character device", w)
		}
	}
	for _, d := range []string{"Files/Temp", "Files/Replaced", "Files/Replaced2"} {
		if v, _ := getxattr(t, p(d), "trusted.overlay.opaque"); v != "y" {
			t.Errorf("%s opaque = %q", d, v)
		}
	}
	if v, ok := getxattr(t, p("Files/Windows"), "trusted.overlay.opaque"); ok {
		t.Errorf("Files/Windows opaque = %q", v)
	}
	// Hives, no UtilityVM, no sidecar.
	if fi, err := os.Stat(p("Hives/SOFTWARE_BASE")); err != nil || fi.Size() != 40000 {
		t.Errorf("hive: %v", err)
	}
	for _, absent := range []string{"UtilityVM", sidecarName} {
		if _, err := os.Lstat(p(absent)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists: %v", absent, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	src := buildTar(t, sampleLayer())
	for _, tc := range []struct {
		name string
		opts []ImportOption
	}{
		{"xattrs", nil},
		{"sidecar", []ImportOption{withSidecarOnly()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir1 := filepath.Join(t.TempDir(), "1")
			importBytes(t, src, dir1, tc.opts...)
			if tc.name == "sidecar" {
				if _, err := os.Stat(filepath.Join(dir1, sidecarName)); err != nil {
					t.Fatalf("no sidecar: %v", err)
				}
				if isWhiteoutAt(t, filepath.Join(dir1, "Files", "deleted.txt")) {
					t.Fatal("sidecar mode made a whiteout device")
				}
			}
			tar1 := exportBytes(t, dir1)
			dir2 := filepath.Join(t.TempDir(), "2")
			importBytes(t, tar1, dir2, tc.opts...)
			tar2 := exportBytes(t, dir2)
			if !bytes.Equal(tar1, tar2) {
				t.Fatalf("export -> import -> export differs:\n%v\n%v", names(readTar(t, tar1)), names(readTar(t, tar2)))
			}
			checkExportedSample(t, readTar(t, tar1))
		})
	}
	// Both representations export the same bytes.
	d1, d2 := filepath.Join(t.TempDir(), "x"), filepath.Join(t.TempDir(), "s")
	importBytes(t, src, d1)
	importBytes(t, src, d2, withSidecarOnly())
	if !bytes.Equal(exportBytes(t, d1), exportBytes(t, d2)) {
		t.Error("xattr and sidecar layers export differently")
	}
}

// checkExportedSample checks the export of sampleLayer against the input.
func checkExportedSample(t *testing.T, got []tarEntry) {
	t.Helper()
	want := []string{
		"Files",
		"Files/.wh.deleted.txt",
		"Files/Documents and Settings",
		"Files/Program Files",
		"Files/Program Files/.wh.OldApp",
		"Files/.wh.Replaced",
		"Files/Replaced",
		"Files/Replaced/new.txt",
		"Files/.wh.Replaced2",
		"Files/Replaced2",
		"Files/Replaced2/only.txt",
		"Files/.wh.Temp",
		"Files/Temp",
		"Files/Temp/new.tmp",
		"Files/Users",
		"Files/Users/Public",
		"Files/Users/Public/link.txt",
		"Files/Windows",
		"Files/Windows/System32",
		"Files/Windows/System32/big.dll",
		"Files/Windows/System32/config",
		"Files/Windows/System32/empty.dat",
		"Files/Windows/hard.ini",
		"Files/Windows/win.ini",
		"Files/Windows/win.ini:Zone.Identifier",
		"Hives",
		"Hives/SOFTWARE_BASE",
		"Hives/SYSTEM_BASE",
	}
	if g := names(got); !reflect.DeepEqual(g, want) {
		t.Fatalf("entries:\n got %q\nwant %q", g, want)
	}
	m := entryMap(got)
	checkSampleTimesAndPAX(t, m)
	checkSampleEntries(t, m)
}

// checkSampleTimesAndPAX checks that every PAX record and time of the
// sample layer's entries survives in the export m.
func checkSampleTimesAndPAX(t *testing.T, m map[string]tarEntry) {
	t.Helper()
	in := map[string]tEntry{}
	for _, e := range sampleLayer() {
		in[e.name] = e
	}
	for name, e := range in {
		if e.typ == tar.TypeLink {
			continue
		}
		// Names are written in order, so hard.ini is now the file and
		// win.ini the link to it.
		if name == "Files/Windows/win.ini" {
			name = "Files/Windows/hard.ini"
		}
		g, ok := m[name]
		if !ok {
			continue
		}
		for k, v := range e.pax {
			if g.PAX[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, g.PAX[k], v)
			}
		}
		if e.typ != tar.TypeDir && !strings.Contains(name, ".wh.") {
			wantM := e.mtime
			if wantM.IsZero() {
				wantM = baseTime
			}
			if !g.ModTime.Equal(wantM) {
				t.Errorf("%s: mtime %v, want %v", name, g.ModTime, wantM)
			}
		}
		if !e.atime.IsZero() && !g.Atime.Equal(e.atime) {
			t.Errorf("%s: atime %v, want %v", name, g.Atime, e.atime)
		}
		if !e.ctime.IsZero() && !g.Ctime.Equal(e.ctime) {
			t.Errorf("%s: ctime %v, want %v", name, g.Ctime, e.ctime)
		}
	}
	if g := m["Files/Windows"]; !g.ModTime.Equal(time.Unix(1650000000, 42)) {
		t.Errorf("dir mtime %v", g.ModTime)
	}
}

// checkSampleEntries checks the export m's entries of each kind: the
// defaults a file and a directory get, links, a junction, an alternate
// data stream, a large file and a whiteout.
func checkSampleEntries(t *testing.T, m map[string]tarEntry) {
	t.Helper()
	if g := m["Files/Windows/System32/empty.dat"]; g.PAX[paxFileAttr] != "32" || g.PAX[paxCreationTime] == "" {
		t.Errorf("empty.dat defaults: %v", g.PAX)
	}
	if g := m["Files/Windows/System32/config"]; g.PAX[paxFileAttr] != "16" || g.Type != tar.TypeDir {
		t.Errorf("config defaults: %v", g.PAX)
	}
	if g := m["Files/Users/Public/link.txt"]; g.PAX[paxFileAttr] != "1056" || g.Link != `..\..\Windows\win.ini` {
		t.Errorf("symlink: %+v", g)
	}
	if g := m["Files/Documents and Settings"]; g.Type != tar.TypeSymlink || g.Link != `C:\Users` {
		t.Errorf("junction: %+v", g)
	}
	if g := m["Files/Windows/win.ini"]; g.Type != tar.TypeLink || g.Link != "Files/Windows/hard.ini" || g.PAX[paxFileAttr] != "33" || g.PAX[paxRawSD] != "" {
		t.Errorf("hard link: %+v", g)
	}
	if g := m["Files/Windows/hard.ini"]; g.Type != tar.TypeReg || g.Digest != digestOf([]byte("[fonts]\r\n")) {
		t.Errorf("hard link primary: %+v", g)
	}
	if g := m["Files/Windows/win.ini:Zone.Identifier"]; g.Type != tar.TypeReg || g.Size != 26 {
		t.Errorf("ADS: %+v", g)
	}
	if g := m["Files/Windows/System32/big.dll"]; g.Size != 3<<20+123 || g.Digest != digestOf(randBytes(1, 3<<20+123)) {
		t.Errorf("big.dll: %+v", g)
	}
	if g := m["Files/.wh.deleted.txt"]; g.Type != tar.TypeReg || g.Size != 0 {
		t.Errorf("whiteout: %+v", g)
	}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

func TestExportDeterministicTimestamp(t *testing.T) {
	src := buildTar(t, sampleLayer())
	ts := time.Unix(1000, 0)
	d1, d2 := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	importBytes(t, src, d1)
	importBytes(t, src, d2)
	// Touch d2 so that its times differ.
	now := time.Now()
	if err := os.Chtimes(filepath.Join(d2, "Files", "Windows"), now, now); err != nil {
		t.Fatal(err)
	}
	a, b := exportBytes(t, d1, WithTimestamp(ts)), exportBytes(t, d2, WithTimestamp(ts))
	if !bytes.Equal(a, b) {
		t.Fatal("WithTimestamp exports differ")
	}
	for _, e := range readTar(t, a) {
		if !e.ModTime.Equal(ts) {
			t.Errorf("%s: mtime %v", e.Name, e.ModTime)
		}
		if e.PAX != nil && e.PAX[paxCreationTime] != "1000" {
			t.Errorf("%s: creationtime %q", e.Name, e.PAX[paxCreationTime])
		}
	}
	if bytes.Equal(exportBytes(t, d1), exportBytes(t, d2)) {
		t.Error("without WithTimestamp the touched tree should differ")
	}
}

func TestUtilityVMIgnored(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "l")
	n := importBytes(t, buildTar(t, []tEntry{
		{name: "UtilityVM", typ: tar.TypeDir},
		{name: "UtilityVM/Files/big", body: make([]byte, 5000)},
		{name: "UtilityVM/Files/link", typ: tar.TypeLink, link: "UtilityVM/Files/big"},
		{name: "UtilityVM/Files/.wh.x"},
		{name: "UtilityVM/Files/dev", typ: tar.TypeChar},
		{name: "Files/a", body: []byte("abc")},
	}), dir)
	if n != 3 {
		t.Errorf("size %d", n)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 || ents[0].Name() != "Files" {
		t.Errorf("layer has %v", ents)
	}
}

func TestEmptyArchive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "l")
	if n := importBytes(t, nil, dir); n != 0 {
		t.Errorf("size %d", n)
	}
	if fi, err := os.Stat(filepath.Join(dir, "Files")); err != nil || !fi.IsDir() {
		t.Errorf("no Files/: %v", err)
	}
	got := readTar(t, exportBytes(t, dir))
	if len(got) != 1 || got[0].Name != "Files" {
		t.Errorf("export of empty layer: %v", names(got))
	}
}

func TestDotSlashNames(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "l")
	importBytes(t, buildTar(t, []tEntry{
		{name: "./", typ: tar.TypeDir},
		{name: "./Files/", typ: tar.TypeDir},
		{name: "./Files/a", body: []byte("a")},
		{name: "Files/d/", typ: tar.TypeDir},
	}), dir)
	for _, p := range []string{"Files/a", "Files/d"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Error(err)
		}
	}
}

// cancelReader cancels a context after n bytes were read.
type cancelReader struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n -= n
	if c.n <= 0 {
		c.cancel()
	}
	return n, err
}

func TestContextCancel(t *testing.T) {
	var entries []tEntry
	for i := 0; i < 200; i++ {
		entries = append(entries, tEntry{name: "Files/f" + string(rune('a'+i%26)) + "/" + time.Duration(i).String(), body: make([]byte, 10000)})
	}
	src := buildTar(t, entries)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	parent, dir := sandbox(t)
	if _, err := Import(ctx, bytes.NewReader(src), dir); !errors.Is(err, context.Canceled) {
		t.Errorf("pre-canceled: %v", err)
	}
	checkSandbox(t, parent)

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	r := &cancelReader{r: bytes.NewReader(src), n: len(src) / 2, cancel: cancel}
	n, err := Import(ctx, r, filepath.Join(t.TempDir(), "l"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("mid-stream: %v", err)
	}
	if n >= 200*10000 {
		t.Errorf("imported everything (%d bytes) despite cancel", n)
	}

	// Export honours ctx too.
	dir2 := filepath.Join(t.TempDir(), "e")
	importBytes(t, src, dir2)
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := Export(ctx, io.Discard, dir2); !errors.Is(err, context.Canceled) {
		t.Errorf("export: %v", err)
	}
}

func TestExistingSymlinkInLayerDir(t *testing.T) {
	// A pre-existing Files symlink (e.g. a reused directory) is not followed.
	parent, dir := sandbox(t)
	if err := os.MkdirAll(filepath.Join(parent, "elsewhere"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(dir, 0o755)
	if err := os.Symlink(filepath.Join(parent, "elsewhere"), filepath.Join(dir, "Files")); err != nil {
		t.Fatal(err)
	}
	_, err := Import(context.Background(), bytes.NewReader(buildTar(t, []tEntry{{name: "Files/x", body: []byte("x")}})), dir)
	if !errors.Is(err, ErrUnsafePath) {
		t.Errorf("err = %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(parent, "elsewhere")); len(ents) != 0 {
		t.Errorf("wrote through the symlink: %v", ents)
	}
}
