//go:build linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
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

// assertImportError imports data and checks the error kind, that it names
// the entry and that nothing leaked out of the layer directory.
func assertImportError(t *testing.T, data []byte, kind error, entry string, opts ...ImportOption) {
	t.Helper()
	parent, dir := sandbox(t)
	_, err := Import(context.Background(), bytes.NewReader(data), dir, opts...)
	if err == nil {
		t.Fatalf("Import succeeded, want %v", kind)
	}
	if !errors.Is(err, kind) {
		t.Errorf("error %v is not %v", err, kind)
	}
	if !errdefs.IsInvalidArgument(err) && !errdefs.IsNotImplemented(err) && !errors.Is(err, context.Canceled) {
		t.Errorf("error %v has no errdefs class", err)
	}
	if entry != "" {
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Name != entry {
			t.Errorf("error %v does not name entry %q", err, entry)
		}
		if !strings.Contains(err.Error(), strconv.Quote(entry)) {
			t.Errorf("message %q lacks %q", err, entry)
		}
	}
	checkSandbox(t, parent)
}

func TestUnsafeNames(t *testing.T) {
	for _, name := range []string{
		"../evil",
		"Files/../../evil",
		"Files/a/../../../evil",
		"/etc/evil",
		"/Files/evil",
		"C:/Files/evil",
		"c:evil",
		`C:\Windows\evil`,
		`Files\..\..\evil`,
		`Files/a\b`,
		"Other/evil",
		"evil",
		"Files/C:",
		"Files/dir:x/y",
		"Files/a:b:c",
		"Files//evil",
		"Files/./evil",
		"Files/\xffevil",
		"Files/.wh..",
		"Files/.wh...",
		"\\\\?\\C:\\evil",
	} {
		t.Run(strings.ReplaceAll(name, "/", "|"), func(t *testing.T) {
			data := buildTar(t, []tEntry{{name: "Files/ok", body: []byte("ok")}, {name: name, body: []byte("evil")}})
			kind := ErrUnsafePath
			if name == "Files/\xffevil" {
				kind = ErrInvalidEntry
			}
			assertImportError(t, data, kind, name)
		})
	}
}

func TestNotWritingThroughSymlinks(t *testing.T) {
	cases := map[string][]tEntry{
		// A link to a directory of the layer, then an entry below it.
		"in-layer": {
			{name: "Files/sub", typ: tar.TypeDir},
			{name: "Files/s", typ: tar.TypeSymlink, link: "sub"},
			{name: "Files/s/x", body: []byte("through")},
		},
		"outside": {
			{name: "Files/s", typ: tar.TypeSymlink, link: "../../.."},
			{name: "Files/s/x", body: []byte("through")},
		},
		"dir-entry": {
			{name: "Files/s", typ: tar.TypeSymlink, link: "/tmp"},
			{name: "Files/s/d", typ: tar.TypeDir},
		},
		"whiteout": {
			{name: "Files/s", typ: tar.TypeSymlink, link: "sub"},
			{name: "Files/s/.wh.x"},
		},
		"hardlink-target": {
			{name: "Files/sub/f", body: []byte("f")},
			{name: "Files/s", typ: tar.TypeSymlink, link: "sub"},
			{name: "Files/l", typ: tar.TypeLink, link: "Files/s/f"},
		},
	}
	for name, entries := range cases {
		t.Run(name, func(t *testing.T) {
			last := entries[len(entries)-1].name
			assertImportError(t, buildTar(t, entries), ErrUnsafePath, last)
		})
	}
	// A symlink out of the layer is stored, not followed, and inert.
	parent, dir := sandbox(t)
	importBytes(t, buildTar(t, []tEntry{
		{name: "Files/up", typ: tar.TypeSymlink, link: "../../../../sentinel"},
		{name: "Files/abs", typ: tar.TypeSymlink, link: "/etc/passwd"},
		{name: "Files/win", typ: tar.TypeSymlink, link: `C:\Windows\System32`},
	}), dir)
	checkSandbox(t, parent)
	for name, want := range map[string]string{"up": `..\..\..\..\sentinel`, "abs": `\etc\passwd`, "win": `C:\Windows\System32`} {
		if got, _ := os.Readlink(filepath.Join(dir, "Files", name)); got != want {
			t.Errorf("%s -> %q, want %q", name, got, want)
		}
		if _, err := os.Stat(filepath.Join(dir, "Files", name)); err == nil {
			t.Errorf("%s resolves to something", name)
		}
	}
	for _, target := range []string{".", ".."} {
		assertImportError(t, buildTar(t, []tEntry{{name: "Files/dot", typ: tar.TypeSymlink, link: target}}), ErrUnsafePath, "Files/dot")
	}
}

func TestHardLinks(t *testing.T) {
	parent, dir := sandbox(t)
	importBytes(t, buildTar(t, []tEntry{
		{name: "Files/a/f", body: []byte("data")},
		{name: "Files/b/g", typ: tar.TypeLink, link: "Files/a/f"},
		{name: "Hives/h", typ: tar.TypeLink, link: "Files/a/f"},
		{name: "Files/s", typ: tar.TypeSymlink, link: "x"},
		{name: "Files/s2", typ: tar.TypeLink, link: "Files/s"},
	}), dir)
	checkSandbox(t, parent)
	a, _ := os.Lstat(filepath.Join(dir, "Files/a/f"))
	for _, other := range []string{"Files/b/g", "Hives/h"} {
		b, _ := os.Lstat(filepath.Join(dir, other))
		if !os.SameFile(a, b) {
			t.Errorf("%s not linked", other)
		}
	}
	got := readTar(t, exportBytes(t, dir))
	m := entryMap(got)
	if e := m["Files/b/g"]; e.Type != tar.TypeLink || e.Link != "Files/a/f" {
		t.Errorf("Files/b/g: %+v", e)
	}
	if e := m["Hives/h"]; e.Type != tar.TypeLink || e.Link != "Files/a/f" {
		t.Errorf("Hives/h: %+v", e)
	}
	if e := m["Files/s2"]; e.Type != tar.TypeLink || e.Link != "Files/s" {
		t.Errorf("Files/s2: %+v", e)
	}

	bad := []struct {
		link string
		kind error
	}{
		{"../../etc/passwd", ErrUnsafePath},
		{"/etc/passwd", ErrUnsafePath},
		{"Files/../../x", ErrUnsafePath},
		{`C:\Windows\x`, ErrUnsafePath},
		{"Files/missing", ErrInvalidEntry},
		{"Files/nodir/missing", ErrInvalidEntry},
		{"Files/d", ErrInvalidEntry},
		{"Files", ErrInvalidEntry},
		{"UtilityVM/Files/x", ErrInvalidEntry},
		{"Files/.wh.x", ErrInvalidEntry},
		{"Files/l", ErrInvalidEntry},
		// NTFS links files, not streams (an export would turn the link
		// into an unrelated copy of the stream).
		{"Files/a:s", ErrInvalidEntry},
	}
	for _, tc := range bad {
		t.Run(strings.ReplaceAll(tc.link, "/", "|"), func(t *testing.T) {
			assertImportError(t, buildTar(t, []tEntry{
				{name: "Files/d", typ: tar.TypeDir},
				{name: "Files/a", body: []byte("a")},
				{name: "Files/a:s", body: []byte("stream")},
				{name: "UtilityVM/Files/x", body: []byte("x")},
				{name: "Files/l", typ: tar.TypeLink, link: tc.link},
			}), tc.kind, "Files/l")
		})
	}
}

func TestWhiteouts(t *testing.T) {
	parent, dir := sandbox(t)
	importBytes(t, buildTar(t, []tEntry{
		{name: "Files/.wh.absent"},               // deletes from a lower layer: fine
		{name: "Files/deep/er/.wh.absent"},       // parents are created
		{name: "Files/.wh.absent"},               // twice: fine
		{name: "Files/f", body: []byte("x")},     // file of this layer ...
		{name: "Files/.wh.f"},                    // ... whiteout is a no-op
		{name: "Files/.wh.g"},                    // whiteout first ...
		{name: "Files/g", body: []byte("new g")}, // ... then a file replaces it
		{name: "Files/.wh.s"},                    // ... or a symlink
		{name: "Files/s", typ: tar.TypeSymlink, link: "x"},
		{name: "Files/.wh.d"}, // or a directory, made implicitly
		{name: "Files/d/in", body: []byte("in")},
		{name: "Files/o/.wh..wh..opq"}, // OCI opaque marker
	}), dir)
	checkSandbox(t, parent)
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	for _, w := range []string{"Files/absent", "Files/deep/er/absent"} {
		if !isWhiteoutAt(t, p(w)) {
			t.Errorf("%s is not a whiteout", w)
		}
	}
	for _, f := range []string{"Files/f", "Files/g"} {
		if fi, err := os.Lstat(p(f)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v", f, err)
		}
	}
	if fi, err := os.Lstat(p("Files/s")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("Files/s: %v", err)
	}
	for _, d := range []string{"Files/d", "Files/o"} {
		if v, _ := getxattr(t, p(d), "trusted.overlay.opaque"); v != "y" {
			t.Errorf("%s not opaque", d)
		}
	}
	names := names(readTar(t, exportBytes(t, dir)))
	for _, want := range []string{"Files/.wh.absent", "Files/.wh.d", "Files/d", "Files/deep/er/.wh.absent", "Files/.wh.o"} {
		if !contains(names, want) {
			t.Errorf("export lacks %s: %q", want, names)
		}
	}
	for _, notWant := range []string{"Files/.wh.f", "Files/.wh.g", "Files/.wh.s"} {
		if contains(names, notWant) {
			t.Errorf("export has %s", notWant)
		}
	}

	// Errors.
	assertImportError(t, buildTar(t, []tEntry{{name: "Hives/.wh.x"}}), ErrInvalidEntry, "Hives/.wh.x")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/.wh..wh..opq"}}), ErrInvalidEntry, "Files/.wh..wh..opq")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/.wh..wh.plnk"}}), ErrUnsupported, "Files/.wh..wh.plnk")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/.wh."}}), ErrInvalidEntry, "Files/.wh.")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/../.wh.x"}}), ErrUnsafePath, "Files/../.wh.x")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/.wh..."}}), ErrUnsafePath, "Files/.wh...")
	assertImportError(t, buildTar(t, []tEntry{{name: ".wh.Files"}}), ErrUnsafePath, ".wh.Files")
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/.wh.d/x", body: []byte("x")}}), ErrInvalidEntry, "Files/.wh.d/x")
	// A whiteout device is not a parent directory.
	assertImportError(t, buildTar(t, []tEntry{{name: "Files/f", body: []byte("x")}, {name: "Files/f/x", body: []byte("x")}}), ErrInvalidEntry, "Files/f/x")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestInvalidEntries(t *testing.T) {
	cases := []struct {
		name    string
		entries []tEntry
		kind    error
		entry   string
	}{
		{"duplicate file", []tEntry{{name: "Files/a", body: []byte("1")}, {name: "Files/a", body: []byte("2")}}, ErrInvalidEntry, "Files/a"},
		{"file over dir", []tEntry{{name: "Files/a", typ: tar.TypeDir}, {name: "Files/a", body: []byte("2")}}, ErrInvalidEntry, "Files/a"},
		{"dir over file", []tEntry{{name: "Files/a", body: []byte("1")}, {name: "Files/a", typ: tar.TypeDir}}, ErrInvalidEntry, "Files/a"},
		{"Files is a file", []tEntry{{name: "Files", body: []byte("1")}}, ErrInvalidEntry, "Files"},
		{"Hives is a symlink", []tEntry{{name: "Hives", typ: tar.TypeSymlink, link: "/"}}, ErrInvalidEntry, "Hives"},
		{"char device", []tEntry{{name: "Files/dev", typ: tar.TypeChar}}, ErrUnsupported, "Files/dev"},
		{"fifo", []tEntry{{name: "Files/fifo", typ: tar.TypeFifo}}, ErrUnsupported, "Files/fifo"},
		{"ADS without file", []tEntry{{name: "Files/a:s", body: []byte("1")}}, ErrInvalidEntry, "Files/a:s"},
		{"ADS on dir", []tEntry{{name: "Files/d", typ: tar.TypeDir}, {name: "Files/d:s", body: []byte("1")}}, ErrInvalidEntry, "Files/d:s"},
		{"dir with colon", []tEntry{{name: "Files/d:s", typ: tar.TypeDir}}, ErrInvalidEntry, "Files/d:s"},
		{"empty symlink", []tEntry{{name: "Files/s", typ: tar.TypeSymlink}}, ErrInvalidEntry, "Files/s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertImportError(t, buildTar(t, tc.entries), tc.kind, tc.entry)
		})
	}
}

func TestBadPAX(t *testing.T) {
	cases := []struct {
		name string
		typ  byte
		pax  map[string]string
	}{
		{"rawsd not base64", tar.TypeReg, map[string]string{paxRawSD: "!!!not base64"}},
		{"rawsd too short", tar.TypeReg, map[string]string{paxRawSD: "AQA="}},
		{"rawsd bad offset", tar.TypeReg, map[string]string{paxRawSD: badOffsetSD()}},
		{"fileattr not numeric", tar.TypeReg, map[string]string{paxFileAttr: "archive"}},
		{"fileattr overflow", tar.TypeReg, map[string]string{paxFileAttr: "4294967296"}},
		{"fileattr negative", tar.TypeReg, map[string]string{paxFileAttr: "-1"}},
		{"file with directory attr", tar.TypeReg, map[string]string{paxFileAttr: "16"}},
		{"dir without directory attr", tar.TypeDir, map[string]string{paxFileAttr: "32"}},
		{"creationtime", tar.TypeReg, map[string]string{paxCreationTime: "yesterday"}},
		{"EA not base64", tar.TypeReg, map[string]string{paxEAPrefix + "x": "%%%"}},
		{"EA without name", tar.TypeReg, map[string]string{paxEAPrefix: "AA=="}},
		{"empty SDDL", tar.TypeReg, map[string]string{paxSDDL: ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assertImportError(t, buildTar(t, []tEntry{{name: "Files/x", typ: tc.typ, pax: tc.pax, body: []byte("x")}}), ErrInvalidMetadata, "Files/x")
		})
	}
}

func badOffsetSD() string {
	b, _ := base64.StdEncoding.DecodeString(testSD(18))
	b[4] = 200 // owner offset beyond the buffer
	return base64.StdEncoding.EncodeToString(b)
}

func TestTruncatedAndCorrupt(t *testing.T) {
	src := buildTar(t, sampleLayer())
	// Cut points inside headers and inside data.
	bigAt := bytes.Index(src, randBytes(1, 64))
	for _, cut := range []int{1, 100, 511, 700, 1500, bigAt + 1000, bigAt + 2<<20, len(src) - 1030} {
		t.Run("cut", func(t *testing.T) {
			assertImportError(t, src[:cut], ErrCorruptArchive, "")
		})
	}
	// A flipped byte in the first header breaks its checksum.
	bad := bytes.Clone(src)
	bad[10] ^= 0xff
	assertImportError(t, bad, ErrCorruptArchive, "")
	// Garbage.
	assertImportError(t, randBytes(9, 5000), ErrCorruptArchive, "")
	// A data truncation names the entry.
	tr := buildTar(t, []tEntry{{name: "Files/a", body: make([]byte, 10000)}})
	assertImportError(t, tr[:4000], ErrCorruptArchive, "Files/a")
}

func TestEntrySizeLimit(t *testing.T) {
	// A huge declared size with no data behind it is refused up front.
	huge := buildTar(t, []tEntry{{name: "Files/ok", body: []byte("ok")}, {name: "Files/huge", size: 1 << 40}})
	assertImportError(t, huge, ErrEntryTooLarge, "Files/huge")
	// Under the limit but not there: truncated, and nothing was preallocated.
	parent, dir := sandbox(t)
	big := buildTar(t, []tEntry{{name: "Files/big", size: 1 << 35}})
	if _, err := Import(context.Background(), bytes.NewReader(big), dir); !errors.Is(err, ErrCorruptArchive) {
		t.Errorf("err = %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "Files", "big"), &st); err == nil && (st.Size != 0 || st.Blocks != 0) {
		t.Errorf("big file has size %d, %d blocks", st.Size, st.Blocks)
	}
	checkSandbox(t, parent)
	// Configurable.
	small := buildTar(t, []tEntry{{name: "Files/a", body: make([]byte, 101)}})
	assertImportError(t, small, ErrEntryTooLarge, "Files/a", WithMaxEntrySize(100))
	importBytes(t, small, filepath.Join(t.TempDir(), "l"), WithMaxEntrySize(101))
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
