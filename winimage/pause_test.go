package winimage_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/winproc/winproc/winimage"
)

func TestPauseImage(t *testing.T) {
	bin := writeTree(t, map[string]string{"pause.exe": "MZ pause", "wincat.exe": "MZ wincat"})
	pauseExe, wincatExe := filepath.Join(bin, "pause.exe"), filepath.Join(bin, "wincat.exe")
	base := fakeNanoserver(t, "10.0.20348.2227")

	for _, tc := range []struct {
		name       string
		opts       winimage.PauseOptions
		wantOSV    string
		wantLayers int
	}{
		{"synthetic base", winimage.PauseOptions{OSVersion: "10.0.17763.1"}, "10.0.17763.1", 2},
		{"operator base", winimage.PauseOptions{Base: base}, "10.0.20348.2227", len(mustLayers(t, base)) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.PauseExe, tc.opts.WincatExe = pauseExe, wincatExe
			img, err := winimage.PauseImage(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			cf := mustConfig(t, img)
			if cf.OS != "windows" || cf.OSVersion != tc.wantOSV {
				t.Errorf("platform %s %s, want windows %s", cf.OS, cf.OSVersion, tc.wantOSV)
			}
			if !reflect.DeepEqual(cf.Config.Entrypoint, []string{`C:\pause.exe`}) || cf.Config.Cmd != nil {
				t.Errorf("entrypoint %q cmd %q", cf.Config.Entrypoint, cf.Config.Cmd)
			}
			if !reflect.DeepEqual(cf.Config.Env[:1], []string{`PATH=C:\Windows\system32;C:\Windows;`}) {
				t.Errorf("env %q", cf.Config.Env)
			}
			layers := mustLayers(t, img)
			if len(layers) != tc.wantLayers {
				t.Fatalf("%d layers, want %d", len(layers), tc.wantLayers)
			}
			files := map[string]string{}
			for _, e := range layerEntries(t, layers[len(layers)-1]) {
				if e.hdr.Typeflag == '0' {
					files[e.hdr.Name] = string(e.body)
				}
			}
			want := map[string]string{"Files/pause.exe": "MZ pause", "Files/Windows/System32/wincat.exe": "MZ wincat"}
			if !reflect.DeepEqual(files, want) {
				t.Errorf("pause layer files %q, want %q", files, want)
			}
			if tc.opts.Base == nil {
				// The bottom layer is the synthetic base.
				sb, err := winimage.SyntheticBaseLayer(ctx, tc.opts.Created)
				if err != nil {
					t.Fatal(err)
				}
				if mustDigest(t, layers[0]) != mustDigest(t, sb) {
					t.Errorf("bottom layer is not the synthetic base")
				}
			}
		})
	}
}

func TestPauseImageErrors(t *testing.T) {
	bin := writeTree(t, map[string]string{"pause.exe": "MZ", "dir/": ""})
	p := filepath.Join(bin, "pause.exe")
	for _, tc := range []struct {
		name string
		opts winimage.PauseOptions
		want string
	}{
		{"no wincat", winimage.PauseOptions{PauseExe: p, OSVersion: "10.0.20348.1"}, "required"},
		{"no os.version", winimage.PauseOptions{PauseExe: p, WincatExe: p}, "os.version is required"},
		{"missing file", winimage.PauseOptions{PauseExe: p, WincatExe: filepath.Join(bin, "nope"), OSVersion: "10.0.20348.1"}, "no such file"},
		{"directory", winimage.PauseOptions{PauseExe: p, WincatExe: filepath.Join(bin, "dir"), OSVersion: "10.0.20348.1"}, "not a regular file"},
		{"base of another build", winimage.PauseOptions{PauseExe: p, WincatExe: p, OSVersion: "10.0.17763.1", Base: fakeNanoserver(t, "10.0.20348.1")}, "os.version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := winimage.PauseImage(ctx, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
