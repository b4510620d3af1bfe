package winimage_test

import (
	"archive/tar"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/winproc/winproc/winimage"
)

func TestLayerFromTreeIsWindowsFormat(t *testing.T) {
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	dir := writeTree(t, map[string]string{
		"pause.exe":                   "MZ pause",
		"Windows/System32/wincat.exe": "MZ wincat",
		"empty/":                      "",
	})
	// Odd on-disk times must not leak into the layer.
	if err := os.Chtimes(filepath.Join(dir, "pause.exe"), time.Unix(12345, 0), time.Unix(12345, 0)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		opts      []winimage.LayerOption
		wantHives bool
	}{
		{"layer", []winimage.LayerOption{winimage.WithCreated(created)}, false},
		{"base layer", []winimage.LayerOption{winimage.WithCreated(created), winimage.AsBaseLayer()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := winimage.LayerFromTree(ctx, dir, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if mt, _ := l.MediaType(); mt != types.OCILayer {
				t.Errorf("media type %q, want %q", mt, types.OCILayer)
			}
			ents := layerEntries(t, l)
			want := []string{
				"Files", "Files/Windows", "Files/Windows/System32", "Files/Windows/System32/wincat.exe",
				"Files/empty", "Files/pause.exe",
			}
			if tc.wantHives {
				want = append(want, "Hives")
			}
			if got := entryNames(ents); !reflect.DeepEqual(got, want) {
				t.Fatalf("entries %q, want %q", got, want)
			}
			for _, e := range ents {
				h := e.hdr
				if h.Name != "Hives" && h.Name != "Files" && !strings.HasPrefix(h.Name, "Files/") {
					t.Errorf("%s: outside Files/ and Hives/", h.Name)
				}
				wantAttr := "32"
				if h.Typeflag == tar.TypeDir {
					wantAttr = "16"
				}
				if got := h.PAXRecords["MSWINDOWS.fileattr"]; got != wantAttr {
					t.Errorf("%s: MSWINDOWS.fileattr=%q, want %q", h.Name, got, wantAttr)
				}
				if _, ok := h.PAXRecords["LIBARCHIVE.creationtime"]; !ok {
					t.Errorf("%s: no LIBARCHIVE.creationtime", h.Name)
				}
				if !h.ModTime.Equal(created) {
					t.Errorf("%s: mtime %v, want %v", h.Name, h.ModTime, created)
				}
			}
			bodies := map[string]string{}
			for _, e := range ents {
				bodies[e.hdr.Name] = string(e.body)
			}
			if bodies["Files/pause.exe"] != "MZ pause" || bodies["Files/Windows/System32/wincat.exe"] != "MZ wincat" {
				t.Errorf("file contents not kept: %q", bodies)
			}
			// The diff ID is the digest of the uncompressed tar.
			rc, err := l.Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			data := readAll(t, rc)
			if diffID, _ := l.DiffID(); diffID.Hex != sha256Hex(data) {
				t.Errorf("diff ID %s does not match the uncompressed tar", diffID)
			}
		})
	}
}

func TestLayerFromTreeErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(t.TempDir(), "missing"), file} {
		if _, err := winimage.LayerFromTree(ctx, dir); err == nil {
			t.Errorf("LayerFromTree(%s) succeeded", dir)
		}
	}
}

func TestSyntheticBaseLayer(t *testing.T) {
	l, err := winimage.SyntheticBaseLayer(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ents := layerEntries(t, l)
	want := []string{
		"Files", "Files/ProgramData", "Files/Users", "Files/Windows", "Files/Windows/System32",
		"Files/" + winimage.SyntheticBaseMarker, "Hives",
	}
	if got := entryNames(ents); !reflect.DeepEqual(got, want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	for _, e := range ents {
		if e.hdr.Name == "Hives" && e.hdr.Typeflag != tar.TypeDir {
			t.Errorf("Hives is not a directory")
		}
		if e.hdr.Name == "Files/"+winimage.SyntheticBaseMarker && string(e.body) != winimage.SyntheticBaseMarkerContent {
			t.Errorf("marker content %q", e.body)
		}
		if !e.hdr.ModTime.Equal(winimage.DefaultCreated) {
			t.Errorf("%s: mtime %v, want DefaultCreated", e.hdr.Name, e.hdr.ModTime)
		}
		if e.hdr.PAXRecords["MSWINDOWS.fileattr"] == "" {
			t.Errorf("%s: no MSWINDOWS.fileattr", e.hdr.Name)
		}
	}
	// Reproducible.
	l2, err := winimage.SyntheticBaseLayer(ctx, winimage.DefaultCreated)
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := mustDigest(t, l), mustDigest(t, l2); d1 != d2 {
		t.Errorf("two synthetic base layers differ: %s, %s", d1, d2)
	}
}
