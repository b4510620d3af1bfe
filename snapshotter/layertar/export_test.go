//go:build linux

package layertar

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fromTree(t *testing.T, src string, opts ...ExportOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := FromTree(context.Background(), &buf, src, opts...); err != nil {
		t.Fatalf("FromTree: %v", err)
	}
	return buf.Bytes()
}

func TestFromTree(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "app", "app.exe"), "MZ")
	writeFile(t, filepath.Join(src, "app", "config", "settings.json"), "{}")
	writeFile(t, filepath.Join(src, "readme.txt"), "hello")
	if err := os.Link(filepath.Join(src, "readme.txt"), filepath.Join(src, "app", "README")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("app/app.exe", filepath.Join(src, "run.exe")); err != nil {
		t.Fatal(err)
	}
	// Metadata given as xattrs is used.
	if err := unix.Setxattr(filepath.Join(src, "readme.txt"), "user.MSWINDOWS.fileattr", []byte("33"), 0); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(src, "empty"), 0o755)

	ts := time.Unix(1234567890, 0)
	data := fromTree(t, src, WithEmptyHives(), WithTimestamp(ts))
	got := readTar(t, data)
	want := []string{
		"Files", "Files/app", "Files/app/README", "Files/app/app.exe", "Files/app/config",
		"Files/app/config/settings.json", "Files/empty", "Files/readme.txt", "Files/run.exe", "Hives",
	}
	if !reflect.DeepEqual(names(got), want) {
		t.Fatalf("entries %q, want %q", names(got), want)
	}
	m := entryMap(got)
	for name, attr := range map[string]string{"Files": "16", "Files/app": "16", "Files/app/app.exe": "32", "Files/run.exe": "1056", "Hives": "16", "Files/app/README": "33"} {
		if m[name].PAX[paxFileAttr] != attr {
			t.Errorf("%s: fileattr %q, want %s", name, m[name].PAX[paxFileAttr], attr)
		}
	}
	if e := m["Files/readme.txt"]; e.Type != tar.TypeLink || e.Link != "Files/app/README" {
		t.Errorf("hard link: %+v", e)
	}
	if e := m["Files/run.exe"]; e.Type != tar.TypeSymlink || e.Link != "app/app.exe" {
		t.Errorf("symlink: %+v", e)
	}
	for _, e := range got {
		if !e.ModTime.Equal(ts) || !e.Atime.Equal(ts) || !e.Ctime.Equal(ts) {
			t.Errorf("%s: times %v %v %v", e.Name, e.ModTime, e.Atime, e.Ctime)
		}
	}
	// Reproducible: touching the tree does not change the output.
	now := time.Now()
	os.Chtimes(filepath.Join(src, "app", "app.exe"), now, now)
	if !bytes.Equal(data, fromTree(t, src, WithEmptyHives(), WithTimestamp(ts))) {
		t.Error("FromTree is not reproducible")
	}
	// The result imports; the importer rewrites the symlink separator.
	dir := filepath.Join(t.TempDir(), "l")
	importBytes(t, data, dir)
	if target, _ := os.Readlink(filepath.Join(dir, "Files", "run.exe")); target != `app\app.exe` {
		t.Errorf("imported symlink %q", target)
	}
	if fi, err := os.Stat(filepath.Join(dir, "Hives")); err != nil || !fi.IsDir() {
		t.Errorf("Hives: %v", err)
	}
}

func TestFromTreeRejects(t *testing.T) {
	cases := map[string]func(t *testing.T, src string){
		"device": func(t *testing.T, src string) {
			if err := unix.Mknod(filepath.Join(src, "dev"), unix.S_IFCHR, 0); err != nil {
				t.Fatal(err)
			}
		},
		"fifo": func(t *testing.T, src string) {
			if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"whiteout name": func(t *testing.T, src string) { writeFile(t, filepath.Join(src, ".wh.x"), "") },
		"backslash":     func(t *testing.T, src string) { writeFile(t, filepath.Join(src, `a\b`), "") },
		"orphan stream": func(t *testing.T, src string) { writeFile(t, filepath.Join(src, "a:s"), "") },
		"bad attr": func(t *testing.T, src string) {
			writeFile(t, filepath.Join(src, "a"), "")
			if err := unix.Setxattr(filepath.Join(src, "a"), "user.MSWINDOWS.fileattr", []byte("nope"), 0); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			src := t.TempDir()
			setup(t, src)
			err := FromTree(context.Background(), &bytes.Buffer{}, src)
			var ee *EntryError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.Name, "Files/") {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestExportDiff(t *testing.T) {
	upper := t.TempDir()
	writeFile(t, filepath.Join(upper, "Windows", "new.txt"), "new")
	if err := unix.Mknod(filepath.Join(upper, "gone.txt"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(upper, "Temp", "fresh"), "fresh")
	if err := unix.Setxattr(filepath.Join(upper, "Temp"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Fatal(err)
	}
	// A copied-up file keeps its Windows metadata.
	if err := unix.Setxattr(filepath.Join(upper, "Windows", "new.txt"), "user.MSWINDOWS.rawsd", []byte(testSD(18)), 0); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ExportDiff(context.Background(), &buf, upper); err != nil {
		t.Fatal(err)
	}
	got := readTar(t, buf.Bytes())
	want := []string{"Files", "Files/.wh.gone.txt", "Files/.wh.Temp", "Files/Temp", "Files/Temp/fresh", "Files/Windows", "Files/Windows/new.txt"}
	if !reflect.DeepEqual(names(got), want) {
		t.Fatalf("entries %q, want %q", names(got), want)
	}
	if sd := entryMap(got)["Files/Windows/new.txt"].PAX[paxRawSD]; sd != testSD(18) {
		t.Errorf("rawsd %q", sd)
	}
	// Imported, it is a layer with the same whiteouts.
	dir := filepath.Join(t.TempDir(), "l")
	importBytes(t, buf.Bytes(), dir)
	if !isWhiteoutAt(t, filepath.Join(dir, "Files", "gone.txt")) {
		t.Error("gone.txt is not a whiteout")
	}
	if !bytes.Equal(exportBytes(t, dir), buf.Bytes()) {
		t.Error("ExportDiff -> Import -> Export differs")
	}

	// Overlay features needing the lower layers are refused.
	for _, x := range []struct{ path, attr string }{
		{"Windows", "trusted.overlay.redirect"},
		{"Windows/new.txt", "trusted.overlay.metacopy"},
	} {
		up := t.TempDir()
		writeFile(t, filepath.Join(up, "Windows", "new.txt"), "new")
		if err := unix.Setxattr(filepath.Join(up, x.path), x.attr, []byte("/x"), 0); err != nil {
			t.Fatal(err)
		}
		err := ExportDiff(context.Background(), &bytes.Buffer{}, up)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v", x.attr, err)
		}
		// FromTree does not care about overlay attributes.
		if err := FromTree(context.Background(), &bytes.Buffer{}, up); err != nil {
			t.Errorf("FromTree: %v", err)
		}
	}
}

func TestExportErrors(t *testing.T) {
	if err := Export(context.Background(), &bytes.Buffer{}, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing dir exported")
	}
	if err := Export(context.Background(), &bytes.Buffer{}, t.TempDir()); err == nil {
		t.Error("dir without Files/ exported")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "Files"), "not a dir")
	if err := Export(context.Background(), &bytes.Buffer{}, dir); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("Files as a file: %v", err)
	}
	// A plain tree with Files/ exports with defaults.
	dir = t.TempDir()
	writeFile(t, filepath.Join(dir, "Files", "a"), "a")
	writeFile(t, filepath.Join(dir, "UtilityVM", "x"), "x")
	if got := names(readTar(t, exportBytes(t, dir))); !reflect.DeepEqual(got, []string{"Files", "Files/a"}) {
		t.Errorf("plain tree: %q", got)
	}
}

// mountOverlay mounts an overlay of lowers (top first) and returns the
// mount point; it is unmounted when the test ends.
func mountOverlay(t *testing.T, lowers []string, upper string) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	os.MkdirAll(mnt, 0o755)
	opts := "lowerdir=" + strings.Join(lowers, ":")
	if upper != "" {
		work := filepath.Join(t.TempDir(), "work")
		os.MkdirAll(work, 0o755)
		opts += ",upperdir=" + upper + ",workdir=" + work
	}
	if err := unix.Mount("overlay", mnt, "overlay", 0, opts); err != nil {
		t.Skipf("cannot mount overlay: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			rel += "=" + string(b)
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOverlayHonoursLayers mounts imported layers with overlayfs and checks
// that whiteouts and opaque directories work, then exports a container's
// changes with ExportDiff and checks that the new layer stacks the same.
func TestOverlayHonoursLayers(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root")
	}
	base := filepath.Join(t.TempDir(), "base")
	importBytes(t, buildTar(t, []tEntry{
		{name: "Files/Windows/win.ini", body: []byte("base")},
		{name: "Files/Windows/old.dll", body: []byte("old")},
		{name: "Files/Temp/a", body: []byte("a")},
		{name: "Files/Temp/b", body: []byte("b")},
		{name: "Files/App/x", body: []byte("x")},
		{name: "Files/keep.txt", body: []byte("keep")},
	}), base)
	patch := filepath.Join(t.TempDir(), "patch")
	importBytes(t, buildTar(t, []tEntry{
		{name: "Files/Windows/.wh.old.dll"},
		{name: "Files/Windows/win.ini", body: []byte("patched")},
		{name: "Files/Temp/.wh..wh..opq"},
		{name: "Files/Temp/c", body: []byte("c")},
		{name: "Files/.wh.App"},
		{name: "Files/App/y", body: []byte("y")},
	}), patch)
	lowers := []string{filepath.Join(patch, "Files"), filepath.Join(base, "Files")}
	mnt := mountOverlay(t, lowers, "")
	want := []string{"App", "App/y=y", "Temp", "Temp/c=c", "Windows", "Windows/win.ini=patched", "keep.txt=keep"}
	if got := listTree(t, mnt); !reflect.DeepEqual(got, want) {
		t.Fatalf("merged view %q, want %q", got, want)
	}

	// A container changes the merged view; its upper dir becomes a layer.
	upper := filepath.Join(t.TempDir(), "upper")
	os.MkdirAll(upper, 0o755)
	cmnt := mountOverlay(t, lowers, upper)
	if err := os.Remove(filepath.Join(cmnt, "keep.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(cmnt, "Temp")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(cmnt, "Temp", "d"), "d")
	writeFile(t, filepath.Join(cmnt, "Windows", "win.ini"), "container")
	final := listTree(t, cmnt)

	var diff bytes.Buffer
	if err := ExportDiff(context.Background(), &diff, upper); err != nil {
		t.Fatal(err)
	}
	layer3 := filepath.Join(t.TempDir(), "l3")
	importBytes(t, diff.Bytes(), layer3)
	mnt3 := mountOverlay(t, append([]string{filepath.Join(layer3, "Files")}, lowers...), "")
	if got := listTree(t, mnt3); !reflect.DeepEqual(got, final) {
		t.Fatalf("stacked diff %q, want %q", got, final)
	}
}
