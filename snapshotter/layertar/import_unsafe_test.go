//go:build linux

// What Import refuses or defuses: unsafe names, links out of the layer,
// hard links, whiteouts, malformed entries and archives, oversized entries;
// each refusal names the entry and leaks nothing out of the layer.

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/containerd/errdefs"
)

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
