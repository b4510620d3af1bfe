package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/version"
	"github.com/winproc/winproc/winimage"
)

type result struct {
	code           int
	stdout, stderr string
}

func runWith(t *testing.T, environ map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	e := &env{stdout: &stdout, stderr: &stderr, getenv: func(k string) string { return environ[k] }}
	code := run(context.Background(), e, args)
	return result{code, stdout.String(), stderr.String()}
}

func runCmd(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, nil, args...)
}

func mustSucceed(t *testing.T, args ...string) result {
	t.Helper()
	r := runCmd(t, args...)
	if r.code != 0 {
		t.Fatalf("winproc %q: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// fixtures writes a tree and pause.exe/wincat.exe stand-ins.
func fixtures(t *testing.T) (dir, tree, pauseExe, wincatExe string) {
	t.Helper()
	dir = t.TempDir()
	tree = filepath.Join(dir, "tree")
	for name, content := range map[string]string{
		filepath.Join(tree, "app", "app.exe"): "MZ app",
		filepath.Join(dir, "pause.exe"):       "MZ pause",
		filepath.Join(dir, "wincat.exe"):      "MZ wincat",
	} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, tree, filepath.Join(dir, "pause.exe"), filepath.Join(dir, "wincat.exe")
}

func TestVersion(t *testing.T) {
	r := runCmd(t, "-version")
	if r.code != 0 || r.stdout != "winproc "+version.Version+"\n" {
		t.Errorf("-version: exit %d, stdout %q", r.code, r.stdout)
	}
}

func TestUsageErrors(t *testing.T) {
	_, tree, pauseExe, wincatExe := fixtures(t)
	out := filepath.Join(t.TempDir(), "out.tar")
	build := []string{"image", "build", "-os-version", "10.0.20348.1", "-tree", tree, "-ref", "example/x:1", "-output", out}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"frob"}, `unknown command "frob"`},
		{"unknown flag", []string{"-frob"}, "flag provided but not defined"},
		{"image without subcommand", []string{"image"}, "winproc image: missing command"},
		{"unknown image subcommand", []string{"image", "frob"}, `unknown command "frob"`},
		{"build unknown flag", append(build, "-frob"), "flag provided but not defined: -frob"},
		{"build without ref", []string{"image", "build", "-os-version", "10.0.20348.1", "-tree", tree, "-output", out}, "-ref is required"},
		{"build without output", []string{"image", "build", "-os-version", "10.0.20348.1", "-tree", tree, "-ref", "x"}, "-output is required"},
		{"build without tree", []string{"image", "build", "-os-version", "10.0.20348.1", "-ref", "x", "-output", out}, "-tree is required"},
		{"build without os-version", []string{"image", "build", "-tree", tree, "-ref", "x", "-output", out}, "-os-version is required"},
		{"build bad os-version", []string{"image", "build", "-os-version", "ltsc2022", "-tree", tree, "-ref", "x", "-output", out}, "invalid Windows OS version"},
		{"build bad format", append(build, "-format", "tarball"), `unknown format "tarball"`},
		{"build bad created", append(build, "-created", "yesterday"), "-created"},
		{"build bad env", append(build, "-env", "NOVALUE"), "want NAME=VALUE"},
		{"build bad entrypoint", append(build, "-entrypoint", "[oops"), "JSON array"},
		{"build index as docker-archive", append(build, "-os-version", "10.0.17763.1", "-format", "docker-archive"), "docker-archive cannot hold"},
		{"build stray argument", append(build, "extra"), `unexpected argument "extra"`},
		{"build no-base and base-layout", append(build, "-no-base", "-base-layout", tree), "exclude each other"},
		{"build host-build without base", append(build, "-host-build", "10.0.20348"), "need -base-layout"},
		{"pause without exes", []string{"image", "pause", "-os-version", "10.0.20348.1", "-ref", "x", "-output", out}, "-pause-exe and -wincat-exe are required"},
		{"pause without os-version", []string{"image", "pause", "-pause-exe", pauseExe, "-wincat-exe", wincatExe, "-ref", "x", "-output", out}, "-os-version is required"},
		{"pause bad host-build", []string{"image", "pause", "-pause-exe", pauseExe, "-wincat-exe", wincatExe, "-ref", "x", "-output", out, "-base-layout", tree, "-host-build", "2022"}, "-host-build"},
		{"inspect without path", []string{"image", "inspect"}, "want exactly one FILE or LAYOUT"},
		{"inspect two paths", []string{"image", "inspect", "a", "b"}, "want exactly one FILE or LAYOUT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, tc.args...)
			if r.code != 2 {
				t.Errorf("exit %d, want 2\nstderr: %s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "Usage:") {
				t.Errorf("stderr %q, want %q and the usage", r.stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a usage error wrote %s", out)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"image", "-h"}, {"image", "build", "-h"}, {"image", "pause", "-help"}, {"image", "inspect", "-h"}} {
		r := runCmd(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "Usage:") {
			t.Errorf("%q: exit %d, output %q", args, r.code, r.stdout+r.stderr)
		}
	}
}

func TestFailures(t *testing.T) {
	dir, tree, pauseExe, _ := fixtures(t)
	out := filepath.Join(dir, "out.tar")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing tree", []string{"image", "build", "-os-version", "10.0.20348.1", "-tree", filepath.Join(dir, "nope"), "-ref", "x", "-output", out}, "winproc image build: layer tree:"},
		{"missing wincat", []string{"image", "pause", "-os-version", "10.0.20348.1", "-pause-exe", pauseExe, "-wincat-exe", filepath.Join(dir, "nope"), "-ref", "x", "-output", out}, "winproc image pause:"},
		{"base layout missing", []string{"image", "pause", "-pause-exe", pauseExe, "-wincat-exe", pauseExe, "-base-layout", filepath.Join(dir, "nope"), "-host-build", "10.0.20348", "-ref", "x", "-output", out}, "winproc image pause: base layout"},
		{"output directory missing", []string{"image", "build", "-os-version", "10.0.20348.1", "-tree", tree, "-ref", "x", "-output", filepath.Join(dir, "no", "out.tar")}, "winproc image build: write"},
		{"inspect missing", []string{"image", "inspect", filepath.Join(dir, "nope")}, "winproc image inspect:"},
		{"inspect not an image", []string{"image", "inspect", pauseExe}, "winproc image inspect:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCmd(t, tc.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1\nstderr: %s", r.code, r.stderr)
			}
			if !strings.HasPrefix(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("stderr %q: want one line starting %q", r.stderr, tc.want)
			}
		})
	}
}

func TestBuildAndInspect(t *testing.T) {
	dir, tree, _, _ := fixtures(t)
	for _, f := range winimage.Formats() {
		t.Run(string(f), func(t *testing.T) {
			out := filepath.Join(dir, "app-"+string(f))
			r := mustSucceed(t, "image", "build", "--os-version", "10.0.20348.1", "--tree", tree,
				"--entrypoint", `C:\app\app.exe`, "--cmd", `["-v","x"]`, "--env", "A=1", "--workdir", `C:\app`,
				"--label", "k=v", "--ref", "example/app:1.0", "--output", out, "--format", string(f))
			if !strings.Contains(r.stdout, "wrote "+string(f)) || !strings.Contains(r.stdout, "10.0.20348.1 (ltsc2022)") {
				t.Errorf("stdout %q", r.stdout)
			}
			ins, err := winimage.Inspect(out)
			if err != nil {
				t.Fatal(err)
			}
			e := ins.Entries[0]
			cf := e.Images()[0].Config
			if cf.OSVersion != "10.0.20348.1" || !reflect.DeepEqual(cf.Config.Entrypoint, []string{`C:\app\app.exe`}) ||
				!reflect.DeepEqual(cf.Config.Cmd, []string{"-v", "x"}) || !reflect.DeepEqual(cf.Config.Env, []string{"A=1"}) ||
				cf.Config.WorkingDir != `C:\app` || cf.Config.Labels["k"] != "v" {
				t.Errorf("config %+v os.version %s", cf.Config, cf.OSVersion)
			}
			if n := len(e.Images()[0].Layers); n != 2 {
				t.Errorf("%d layers, want synthetic base + tree", n)
			}
			// Flags after the path work too.
			r = mustSucceed(t, "image", "inspect", out, "--host-build", "10.0.20348")
			for _, want := range []string{"example/app:1.0", `entrypoint ["C:\\app\\app.exe"]`, "10.0.20348.1 (ltsc2022)", "host 10.0.20348 runs"} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("inspect output lacks %q:\n%s", want, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "PROBLEM") {
				t.Errorf("inspect found problems:\n%s", r.stdout)
			}
		})
	}
}

func TestBuildIndexAndNoBase(t *testing.T) {
	dir, tree, _, _ := fixtures(t)
	out := filepath.Join(dir, "multi.tar")
	mustSucceed(t, "image", "build", "-os-version", "10.0.17763.1", "-os-version", "10.0.20348.1", "-tree", tree, "-no-base",
		"-ref", "example/multi:1", "-output", out)
	ins, err := winimage.Inspect(out)
	if err != nil {
		t.Fatal(err)
	}
	e := ins.Entries[0]
	if !e.IsIndex() || len(e.Manifests) != 2 {
		t.Fatalf("not an index of two: %+v", e)
	}
	for i, want := range []string{"10.0.17763.1", "10.0.20348.1"} {
		m := e.Manifests[i]
		if m.Descriptor.Platform == nil || m.Descriptor.Platform.OSVersion != want || m.Config.OSVersion != want {
			t.Errorf("manifest %d: descriptor %+v, config os.version %s", i, m.Descriptor.Platform, m.Config.OSVersion)
		}
		if len(m.Layers) != 1 {
			t.Errorf("manifest %d: %d layers, want only the tree (-no-base)", i, len(m.Layers))
		}
	}
	r := mustSucceed(t, "image", "inspect", "-host-build", "10.0.17763", out)
	if !strings.Contains(r.stdout, "host 10.0.17763 runs "+e.Manifests[0].Descriptor.Digest.String()) {
		t.Errorf("inspect does not pick the ltsc2019 manifest:\n%s", r.stdout)
	}
}

func TestPause(t *testing.T) {
	dir, tree, pauseExe, wincatExe := fixtures(t)
	// A stand-in nanoserver layout with two builds.
	base := filepath.Join(dir, "nanoserver")
	mustSucceed(t, "image", "build", "-os-version", "10.0.17763.5329", "-os-version", "10.0.20348.2227", "-tree", tree,
		"-cmd", `C:\Windows\System32\cmd.exe`, "-ref", "mcr.microsoft.com/windows/nanoserver:fake", "-output", base, "-format", "oci-layout")

	for _, tc := range []struct {
		name    string
		args    []string
		wantOSV string
		layers  int
	}{
		{"synthetic", []string{"-os-version", "10.0.20348.1"}, "10.0.20348.1", 2},
		{"base ltsc2022", []string{"-base-layout", base, "-host-build", "10.0.20348"}, "10.0.20348.2227", 3},
		{"base ltsc2019", []string{"-base-layout", base, "-host-build", "10.0.17763", "-base-ref", "mcr.microsoft.com/windows/nanoserver:fake"}, "10.0.17763.5329", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".tar")
			args := append([]string{"image", "pause", "-pause-exe", pauseExe, "-wincat-exe", wincatExe,
				"-ref", "example/pause:1.0", "-output", out, "-format", "docker-archive"}, tc.args...)
			mustSucceed(t, args...)
			ins, err := winimage.Inspect(out)
			if err != nil {
				t.Fatal(err)
			}
			img := ins.Entries[0]
			if img.Config.OSVersion != tc.wantOSV || len(img.Layers) != tc.layers {
				t.Errorf("os.version %s with %d layers, want %s with %d", img.Config.OSVersion, len(img.Layers), tc.wantOSV, tc.layers)
			}
			if !reflect.DeepEqual(img.Config.Config.Entrypoint, []string{`C:\pause.exe`}) || img.Config.Config.Cmd != nil {
				t.Errorf("entrypoint %q cmd %q", img.Config.Config.Entrypoint, img.Config.Config.Cmd)
			}
			if len(img.Problems) > 0 {
				t.Errorf("problems %q", img.Problems)
			}
		})
	}
	// The base cannot run on the host.
	r := runCmd(t, "image", "pause", "-pause-exe", pauseExe, "-wincat-exe", wincatExe, "-base-layout", base,
		"-host-build", "10.0.14393", "-ref", "example/pause:1.0", "-output", filepath.Join(dir, "x.tar"))
	if r.code != 1 || !strings.Contains(r.stderr, "can run on this host") {
		t.Errorf("base for another host: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestCreatedTime(t *testing.T) {
	dir, tree, _, _ := fixtures(t)
	for _, tc := range []struct {
		name    string
		environ map[string]string
		args    []string
		want    time.Time
	}{
		{"default", nil, nil, time.Unix(0, 0)},
		{"SOURCE_DATE_EPOCH", map[string]string{"SOURCE_DATE_EPOCH": "86400"}, nil, time.Unix(86400, 0)},
		{"flag wins", map[string]string{"SOURCE_DATE_EPOCH": "86400"}, []string{"-created", "2024-01-02T03:04:05Z"}, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".tar")
			args := append([]string{"image", "build", "-os-version", "10.0.20348.1", "-tree", tree, "-ref", "x", "-output", out}, tc.args...)
			if r := runWith(t, tc.environ, args...); r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			ins, err := winimage.Inspect(out)
			if err != nil {
				t.Fatal(err)
			}
			if got := ins.Entries[0].Config.Created.Time; !got.Equal(tc.want) {
				t.Errorf("created %v, want %v", got, tc.want)
			}
		})
	}
}
