package doctor

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// entry is a tar entry of a test layer: a name ending in '/' is a directory,
// "name -> target" a symlink, anything else a file.
type entry string

func layerTar(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		name := string(e)
		h := &tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg}
		switch {
		case strings.HasSuffix(name, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case strings.Contains(name, " -> "):
			h.Name, h.Linkname, _ = strings.Cut(name, " -> ")
			h.Typeflag = tar.TypeSymlink
		}
		body := "MZ " + h.Name
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// opener serves layers (bottom first) and records which were opened.
func opener(layers [][]byte, opened *[]int) LayerOpener {
	return func(i int) (io.ReadCloser, error) {
		*opened = append(*opened, i)
		return io.NopCloser(bytes.NewReader(layers[i])), nil
	}
}

var baseLayer = []entry{
	"Files/", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/wincat.exe",
	"Files/Windows/System32/cmd.exe", "Files/pause.exe", "Hives/", "Hives/SOFTWARE_BASE",
}

func TestDoctorFindFiles(t *testing.T) {
	const wincat, pause = "Windows/System32/wincat.exe", "pause.exe"
	for _, tc := range []struct {
		name   string
		layers [][]entry // bottom first
		want   map[string]FileState
		opened []int // layers read, top first
	}{
		{
			name:   "both in the top layer: the base is never read",
			layers: [][]entry{{"Files/", "Files/base.txt"}, {"Files/", "Files/pause.exe", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/wincat.exe"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
			opened: []int{1},
		},
		{
			name:   "in the base, below an unrelated layer",
			layers: [][]entry{baseLayer, {"Files/", "Files/app/", "Files/app/x.exe"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
			opened: []int{1, 0},
		},
		{
			name:   "missing everywhere",
			layers: [][]entry{{"Files/", "Files/pause.exe"}, {"Files/", "Files/Windows/", "Files/Windows/System32/"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
			opened: []int{1, 0},
		},
		{
			name:   "a whiteout of the file hides the base's",
			layers: [][]entry{baseLayer, {"Files/", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/.wh.wincat.exe"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
			opened: []int{1, 0},
		},
		{
			name:   "a whiteout of a directory on the path hides the base's file",
			layers: [][]entry{baseLayer, {"Files/", "Files/Windows/", "Files/Windows/.wh.System32"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
		},
		{
			name:   "an opaque directory on the path hides the base's file",
			layers: [][]entry{baseLayer, {"Files/", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/.wh..wh..opq", "Files/Windows/System32/other.exe"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
		},
		{
			name:   "deleted and recreated in the same layer: present",
			layers: [][]entry{baseLayer, {"Files/", "Files/Windows/", "Files/Windows/.wh.System32", "Files/Windows/System32/", "Files/Windows/System32/wincat.exe"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
		},
		{
			name:   "a whiteout in a layer below does not hide a file above",
			layers: [][]entry{baseLayer, {"Files/", "Files/.wh.pause.exe"}, {"Files/", "Files/pause.exe"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
		},
		{
			name:   "a whiteout of another name hides nothing",
			layers: [][]entry{baseLayer, {"Files/", "Files/.wh.pause.exe.bak", "Files/Windows/", "Files/Windows/.wh.System", "Files/Windows/System32/", "Files/Windows/System32/.wh.wincat.exe.old"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
		},
		{
			name:   "a directory where the file should be",
			layers: [][]entry{baseLayer, {"Files/", "Files/pause.exe/", "Files/pause.exe/x"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FileAbsent},
		},
		{
			name:   "a file where a directory on the path should be",
			layers: [][]entry{baseLayer, {"Files/", "Files/Windows/", "Files/Windows/System32"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
		},
		{
			name:   "names match case-insensitively, ./ prefixes and streams are handled",
			layers: [][]entry{{"./files/", "./files/PAUSE.EXE", "./files/PAUSE.EXE:Zone.Identifier", "./files/windows/", "./files/windows/system32/", "./files/windows/system32/WinCat.Exe"}},
			want:   map[string]FileState{wincat: FilePresent, pause: FilePresent},
		},
		{
			name:   "an alternate data stream alone is not the file",
			layers: [][]entry{{"Files/", "Files/pause.exe:stream"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FileAbsent},
		},
		{
			name:   "outside Files/ does not count",
			layers: [][]entry{{"Hives/", "Hives/pause.exe", "UtilityVM/Files/pause.exe", "pause.exe"}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FileAbsent},
		},
		{
			name:   "a link on the path: unknown",
			layers: [][]entry{{"Files/", "Files/pause.exe", "Files/Windows/", `Files/Windows/System32 -> C:\Other`}},
			want:   map[string]FileState{wincat: FileUnknown, pause: FilePresent},
		},
		{
			name:   "a link at the path counts as the file",
			layers: [][]entry{{"Files/", `Files/pause.exe -> C:\real\pause.exe`}},
			want:   map[string]FileState{wincat: FileAbsent, pause: FilePresent},
		},
		{
			name:   "no layers",
			layers: nil,
			want:   map[string]FileState{wincat: FileAbsent, pause: FileAbsent},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tars [][]byte
			for _, l := range tc.layers {
				tars = append(tars, layerTar(t, l...))
			}
			var opened []int
			got, err := FindFiles(len(tars), opener(tars, &opened), []string{wincat, pause})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("FindFiles = %v, want %v", got, tc.want)
			}
			if tc.opened != nil && fmt.Sprint(opened) != fmt.Sprint(tc.opened) {
				t.Errorf("layers read: %v, want %v", opened, tc.opened)
			}
		})
	}
}

func TestDoctorFindFilesErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := FindFiles(1, func(int) (io.ReadCloser, error) { return nil, boom }, []string{"pause.exe"})
	if !errors.Is(err, boom) {
		t.Errorf("open error: %v", err)
	}
	corrupt := layerTar(t, "Files/", "Files/a.txt")[:700]
	_, err = FindFiles(1, func(int) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(corrupt)), nil }, []string{"pause.exe"})
	if err == nil {
		t.Error("a truncated layer was read without an error")
	}
}
