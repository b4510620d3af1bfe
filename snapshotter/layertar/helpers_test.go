//go:build linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// withSidecarOnly stores everything in the sidecar, as on platforms without
// xattrs and mknod.
func withSidecarOnly() ImportOption {
	return func(c *importConfig) { c.sidecarOnly = true }
}

// tEntry describes one tar entry to build.
type tEntry struct {
	name  string
	typ   byte
	body  []byte
	link  string
	pax   map[string]string
	mtime time.Time
	atime time.Time
	ctime time.Time
	size  int64 // declared size override (header only, no data)
}

var baseTime = time.Unix(1700000000, 123456789)

func buildTar(t testing.TB, entries []tEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		mt := e.mtime
		if mt.IsZero() {
			mt = baseTime
		}
		hdr := &tar.Header{
			Format:     tar.FormatPAX,
			Name:       e.name,
			Typeflag:   typ,
			Linkname:   e.link,
			ModTime:    mt,
			AccessTime: e.atime,
			ChangeTime: e.ctime,
			PAXRecords: e.pax,
		}
		switch typ {
		case tar.TypeDir:
			hdr.Mode = modeDir
		case tar.TypeReg:
			hdr.Mode = modeReg
			hdr.Size = int64(len(e.body))
		case tar.TypeSymlink:
			hdr.Mode = modeSymlink
		case tar.TypeLink:
			hdr.Mode = modeLink
		}
		if e.size != 0 {
			hdr.Size = e.size
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatalf("header %q: %v", e.name, err)
			}
			// Deliberately no data: the archive ends here.
			return buf.Bytes()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("header %q: %v", e.name, err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testSD returns a base64 self-relative security descriptor with owner SID
// S-1-5-<rid> and a NULL DACL.
func testSD(rid uint32) string {
	b := make([]byte, 32)
	b[0] = 1                                         // revision
	binary.LittleEndian.PutUint16(b[2:], 0x8000|0x4) // SE_SELF_RELATIVE|SE_DACL_PRESENT
	binary.LittleEndian.PutUint32(b[4:], 20)         // owner
	b[20], b[21] = 1, 1                              // SID revision, 1 sub authority
	b[27] = 5                                        // NT authority
	binary.LittleEndian.PutUint32(b[28:], rid)
	return base64.StdEncoding.EncodeToString(b)
}

func randBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// sampleLayer is a Windows layer exercising everything the format has.
func sampleLayer() []tEntry {
	dirPax := func(sd uint32) map[string]string {
		return map[string]string{paxFileAttr: "16", paxRawSD: testSD(sd), paxCreationTime: "1600000000.5"}
	}
	return []tEntry{
		{name: "Files", typ: tar.TypeDir, pax: dirPax(18)},
		{name: "Files/Windows", typ: tar.TypeDir, pax: dirPax(18), mtime: time.Unix(1650000000, 42)},
		{name: "Files/Windows/System32", typ: tar.TypeDir, pax: dirPax(19)},
		{name: "Files/Windows/System32/config", typ: tar.TypeDir},
		{name: "Files/Windows/win.ini", body: []byte("[fonts]\r\n"), atime: time.Unix(1700000100, 5), ctime: time.Unix(1700000200, 7), pax: map[string]string{
			paxFileAttr:              "33", // ARCHIVE|READONLY
			paxRawSD:                 testSD(544),
			paxCreationTime:          "1500000000.25",
			paxEAPrefix + "$KERNEL.": base64.StdEncoding.EncodeToString([]byte{1, 2, 3}),
			"MSWINDOWS.future":       "kept verbatim",
		}},
		{name: "Files/Windows/win.ini:Zone.Identifier", body: []byte("[ZoneTransfer]\r\nZoneId=3\r\n")},
		{name: "Files/Windows/hard.ini", typ: tar.TypeLink, link: "Files/Windows/win.ini", pax: map[string]string{paxFileAttr: "33"}},
		{name: "Files/Windows/System32/big.dll", body: randBytes(1, 3<<20+123), pax: map[string]string{paxFileAttr: "32", paxRawSD: testSD(18)}},
		{name: "Files/Windows/System32/empty.dat"},
		{name: "Files/Documents and Settings", typ: tar.TypeSymlink, link: `C:\Users`, pax: map[string]string{
			paxFileAttr: "1040", paxMountPoint: "1", paxRawSD: testSD(18)}},
		{name: "Files/Users/Public/link.txt", typ: tar.TypeSymlink, link: "../../Windows/win.ini"},
		{name: "Files/.wh.deleted.txt"},
		{name: "Files/Program Files/.wh.OldApp"},
		{name: "Files/Temp/.wh..wh..opq"},
		{name: "Files/Temp/new.tmp", body: []byte("tmp")},
		{name: "Files/.wh.Replaced"},
		{name: "Files/Replaced", typ: tar.TypeDir, pax: dirPax(18)},
		{name: "Files/Replaced/new.txt", body: []byte("new")},
		{name: "Files/Replaced2/only.txt", body: []byte("x")},
		{name: "Files/.wh.Replaced2"}, // whiteout after the directory
		{name: "Hives", typ: tar.TypeDir},
		{name: "Hives/SOFTWARE_BASE", body: randBytes(2, 40000)},
		{name: "Hives/SYSTEM_BASE", body: randBytes(3, 1000)},
		{name: "UtilityVM", typ: tar.TypeDir},
		{name: "UtilityVM/Files/EFI/Microsoft/Boot/BCD", body: []byte("bcd")},
		{name: "UtilityVM/Files/.wh.gone"},
	}
}

// sampleSize is the data Import reports for sampleLayer.
func sampleSize() int64 {
	var n int64
	for _, e := range sampleLayer() {
		if (e.typ == 0 || e.typ == tar.TypeReg) && !strings.HasPrefix(e.name, "UtilityVM") && !strings.Contains(e.name, ".wh.") {
			n += int64(len(e.body))
		}
	}
	return n
}

// tarEntry is a parsed entry, for comparisons.
type tarEntry struct {
	Name     string
	Type     byte
	Size     int64
	Link     string
	Digest   string
	PAX      map[string]string // MSWINDOWS.* and LIBARCHIVE.*
	ModTime  time.Time
	Atime    time.Time
	Ctime    time.Time
	Mode     int64
	HasAtime bool
}

func readTar(t testing.TB, data []byte) []tarEntry {
	t.Helper()
	var out []tarEntry
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		h := sha256.New()
		if _, err := io.Copy(h, tr); err != nil {
			t.Fatal(err)
		}
		e := tarEntry{
			Name: hdr.Name, Type: hdr.Typeflag, Size: hdr.Size, Link: hdr.Linkname,
			Digest: hex.EncodeToString(h.Sum(nil))[:16], ModTime: hdr.ModTime,
			Atime: hdr.AccessTime, Ctime: hdr.ChangeTime, Mode: hdr.Mode,
		}
		for k, v := range hdr.PAXRecords {
			if strings.HasPrefix(k, "MSWINDOWS.") || strings.HasPrefix(k, "LIBARCHIVE.") {
				if e.PAX == nil {
					e.PAX = map[string]string{}
				}
				e.PAX[k] = v
			}
		}
		out = append(out, e)
	}
}

func entryMap(entries []tarEntry) map[string]tarEntry {
	m := make(map[string]tarEntry, len(entries))
	for _, e := range entries {
		m[e.Name] = e
	}
	return m
}

// sandbox returns a layer directory inside a fresh parent directory that
// also holds a sentinel file; checkSandbox verifies that nothing appeared
// or changed outside the layer directory.
func sandbox(t testing.TB) (parent, dir string) {
	t.Helper()
	parent = t.TempDir()
	if err := os.WriteFile(filepath.Join(parent, "sentinel"), []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	return parent, filepath.Join(parent, "layer")
}

func checkSandbox(t testing.TB, parent string) {
	t.Helper()
	ents, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "layer" && e.Name() != "sentinel" {
			t.Errorf("unexpected %s outside the layer directory", e.Name())
		}
	}
	b, err := os.ReadFile(filepath.Join(parent, "sentinel"))
	if err != nil || string(b) != "untouched" {
		t.Errorf("sentinel changed: %q, %v", b, err)
	}
	dir := filepath.Join(parent, "layer")
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return
	}
	// No symlink may resolve anywhere: targets are single components.
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if strings.Contains(target, "/") || target == "." || target == ".." {
				t.Errorf("symlink %s -> %q could resolve elsewhere", p, target)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func importBytes(t testing.TB, data []byte, dir string, opts ...ImportOption) int64 {
	t.Helper()
	n, err := Import(context.Background(), bytes.NewReader(data), dir, opts...)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	return n
}

func exportBytes(t testing.TB, dir string, opts ...ExportOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Export(context.Background(), &buf, dir, opts...); err != nil {
		t.Fatalf("Export: %v", err)
	}
	return buf.Bytes()
}

func names(entries []tarEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}
