package pauseimage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/winpath"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// layers makes layer directories, nearest first, each with the files
// (paths relative to C:\ with '/'; a trailing '/' makes a directory) under
// Files/.
func layers(t *testing.T, trees ...[]string) []string {
	t.Helper()
	root := t.TempDir()
	var dirs []string
	for i, files := range trees {
		dir := filepath.Join(root, string(rune('a'+i)))
		if err := os.MkdirAll(filepath.Join(dir, layermount.FilesDir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			p := filepath.Join(dir, layermount.FilesDir, filepath.FromSlash(f))
			if f[len(f)-1] == '/' {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("MZ"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

func TestFindFile(t *testing.T) {
	tests := []struct {
		name   string
		layers [][]string
		path   string
		found  bool
	}{
		{name: "in the nearest layer", layers: [][]string{{"pause.exe"}, {"Windows/"}}, path: "pause.exe", found: true},
		{name: "in the base layer", layers: [][]string{{"other.exe"}, {"Windows/System32/wincat.exe"}}, path: `Windows\System32\wincat.exe`, found: true},
		{name: "nowhere", layers: [][]string{{"other.exe"}, {"Windows/"}}, path: "pause.exe"},
		{name: "no layers", path: "pause.exe"},
		{name: "a layer without Files", layers: [][]string{nil, {"pause.exe"}}, path: "pause.exe", found: true},
		{name: "case of the file", layers: [][]string{{"PAUSE.EXE"}}, path: "pause.exe", found: true},
		{name: "case of the directories", layers: [][]string{{"windows/system32/WinCat.exe"}}, path: `Windows\System32\wincat.exe`, found: true},
		{name: "a directory is no program", layers: [][]string{{"pause.exe/"}}, path: "pause.exe"},
		{name: "a nearer directory hides a farther file", layers: [][]string{{"pause.exe/"}, {"pause.exe"}}, path: "pause.exe"},
		{name: "a nearer file hides a farther directory", layers: [][]string{{"Windows"}, {"Windows/System32/wincat.exe"}}, path: `Windows\System32\wincat.exe`},
		{name: "directories merge", layers: [][]string{{"Windows/System32/other.dll"}, {"Windows/System32/wincat.exe"}}, path: `Windows\System32\wincat.exe`, found: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			components, _ := winpath.SystemDrivePath(`C:\` + tc.path)
			err := findFile(layers(t, tc.layers...), components)
			if tc.found && err != nil {
				t.Fatalf("findFile: %v", err)
			}
			if !tc.found && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("findFile = %v, want not found", err)
			}
		})
	}
}

func TestFindFileLink(t *testing.T) {
	dirs := layers(t, []string{"real/pause.exe"})
	if err := os.Symlink("real", filepath.Join(dirs[0], layermount.FilesDir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := findFile(dirs, []string{"link", "pause.exe"}); !errors.Is(err, errUnverifiable) {
		t.Fatalf("findFile through a link = %v, want unverifiable", err)
	}
	// A link as the program itself is a program.
	if err := os.Symlink("real/pause.exe", filepath.Join(dirs[0], layermount.FilesDir, "p.exe")); err != nil {
		t.Fatal(err)
	}
	if err := findFile(dirs, []string{"p.exe"}); err != nil {
		t.Fatalf("findFile of a link: %v", err)
	}
}

func TestFindFileWhiteouts(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("overlayfs whiteouts are the Linux emulation's")
	}
	mknodWhiteout := func(t *testing.T, p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := mknod(p); err != nil {
			t.Skipf("cannot make a whiteout device: %v", err)
		}
	}

	t.Run("whiteout of the file", func(t *testing.T) {
		dirs := layers(t, []string{"other.exe"}, []string{"pause.exe"})
		mknodWhiteout(t, filepath.Join(dirs[0], layermount.FilesDir, "pause.exe"))
		if err := findFile(dirs, []string{"pause.exe"}); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("findFile = %v, want not found", err)
		}
	})
	t.Run("whiteout of the file in another case", func(t *testing.T) {
		dirs := layers(t, []string{"other.exe"}, []string{"pause.exe"})
		mknodWhiteout(t, filepath.Join(dirs[0], layermount.FilesDir, "Pause.exe"))
		if err := findFile(dirs, []string{"pause.exe"}); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("findFile = %v, want not found", err)
		}
	})
	t.Run("whiteout of a directory", func(t *testing.T) {
		dirs := layers(t, []string{"other.exe"}, []string{"Windows/System32/wincat.exe"})
		mknodWhiteout(t, filepath.Join(dirs[0], layermount.FilesDir, "Windows"))
		if err := findFile(dirs, []string{"Windows", "System32", "wincat.exe"}); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("findFile = %v, want not found", err)
		}
	})
	t.Run("file recreated above its whiteout", func(t *testing.T) {
		dirs := layers(t, []string{"pause.exe"}, nil, []string{"pause.exe"})
		mknodWhiteout(t, filepath.Join(dirs[1], layermount.FilesDir, "pause.exe"))
		if err := findFile(dirs, []string{"pause.exe"}); err != nil {
			t.Fatalf("findFile: %v", err)
		}
	})
	t.Run("whiteout in a farther layer than the file", func(t *testing.T) {
		dirs := layers(t, []string{"pause.exe"}, nil)
		mknodWhiteout(t, filepath.Join(dirs[1], layermount.FilesDir, "pause.exe"))
		if err := findFile(dirs, []string{"pause.exe"}); err != nil {
			t.Fatalf("findFile: %v", err)
		}
	})
	t.Run("opaque directory", func(t *testing.T) {
		dirs := layers(t, []string{"Windows/System32/other.dll"}, []string{"Windows/System32/wincat.exe"})
		if err := setOpaque(filepath.Join(dirs[0], layermount.FilesDir, "Windows")); err != nil {
			t.Skipf("cannot mark a directory opaque: %v", err)
		}
		if err := findFile(dirs, []string{"Windows", "System32", "wincat.exe"}); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("findFile = %v, want not found", err)
		}
		// The opaque directory's own content stays.
		if err := findFile(dirs, []string{"Windows", "System32", "other.dll"}); err != nil {
			t.Fatalf("findFile: %v", err)
		}
	})
}

func TestCheckProgram(t *testing.T) {
	ctx := context.Background()
	dirs := layers(t, []string{"pause.exe"}, []string{"Windows/System32/"})
	tests := []struct {
		name    string
		args    []string
		escaped bool
		fromCmd bool
		wantMsg string // "" for no error
	}{
		{name: "present", args: []string{`C:\pause.exe`}},
		{name: "present, other spelling", args: []string{`/PAUSE.EXE`, "-v"}},
		{name: "missing", args: []string{`C:\pause2.exe`}, wantMsg: `pause image "example/pause:1" has no C:\pause2.exe (its entrypoint)`},
		{name: "missing, from cmd", args: []string{`C:\Windows\pause.exe`}, fromCmd: true, wantMsg: `pause image "example/pause:1" has no C:\Windows\pause.exe (its cmd)`},
		{name: "escaped command line", args: []string{`C:\pause.exe -v`}, escaped: true},
		{name: "escaped command line, missing", args: []string{`"C:\Program Files\pause.exe" -v`}, escaped: true, wantMsg: `pause image "example/pause:1" has no C:\Program Files\pause.exe (its entrypoint)`},
		{name: "bare name, not checked", args: []string{"cmd.exe", "/c", "ping"}},
		{name: "other drive, not checked", args: []string{`D:\pause.exe`}},
		{name: "none", wantMsg: `pause image "example/pause:1" has neither an entrypoint nor a cmd; the pause process needs one (e.g. C:\pause.exe)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkProgram(ctx, "example/pause:1", tc.args, tc.escaped, dirs, tc.fromCmd)
			if tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("checkProgram: %v", err)
				}
				return
			}
			if !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("checkProgram = %v, want a failed precondition", err)
			}
			if want := tc.wantMsg + ": failed precondition"; err.Error() != want {
				t.Errorf("message\n%s\nwant\n%s", err, want)
			}
		})
	}
}
