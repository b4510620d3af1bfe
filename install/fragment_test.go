package install

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/winproc/winproc/shim/options"
)

var update = flag.Bool("update", false, "rewrite "+FragmentFile+" and "+DefaultFragmentFile+" from Fragment")

// The shipped fragment is the generator's output.
func TestFragmentUpToDate(t *testing.T) {
	for file, defaultHandler := range map[string]bool{FragmentFile: false, DefaultFragmentFile: true} {
		want, err := Fragment(defaultHandler)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v: run go test ./install -run TestFragmentUpToDate -update", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date: run go test ./install -run TestFragmentUpToDate -update\n--- want\n%s", file, want)
		}
	}
}

// What install.ps1 relies on: the handler, the pause image it imports,
// no pause pre-pull, the snapshotter's pipe, and no setting that belongs to
// the node's own config (a fragment must not move containerd's sockets or
// directories).
func TestFragmentContent(t *testing.T) {
	b, err := Fragment(false)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version      int            `toml:"version"`
		Root         string         `toml:"root"`
		State        string         `toml:"state"`
		GRPC         map[string]any `toml:"grpc"`
		ProxyPlugins map[string]struct {
			Type, Address, Platform string
		} `toml:"proxy_plugins"`
		Plugins struct {
			Runtime struct {
				Containerd struct {
					Runtimes map[string]struct {
						RuntimeType           string         `toml:"runtime_type"`
						Sandboxer             string         `toml:"sandboxer"`
						Snapshotter           string         `toml:"snapshotter"`
						DisablePauseImagePull bool           `toml:"disable_pause_image_pull"`
						Options               map[string]any `toml:"options"`
					} `toml:"runtimes"`
				} `toml:"containerd"`
			} `toml:"io.containerd.cri.v1.runtime"`
			ShimManager map[string]any `toml:"io.containerd.shim.v1.manager"`
		} `toml:"plugins"`
	}
	if err := toml.Unmarshal(b, &f); err != nil {
		t.Fatalf("fragment is not TOML: %v", err)
	}
	if f.Version != 3 {
		t.Errorf("version %d, want 3 (every containerd 2.x reads it)", f.Version)
	}
	if f.Root != "" || f.State != "" || f.GRPC != nil || f.Plugins.ShimManager != nil {
		t.Errorf("the fragment sets node settings: root %q, state %q, grpc %v, shim manager %v", f.Root, f.State, f.GRPC, f.Plugins.ShimManager)
	}
	for _, name := range []string{"windowsfilter", "windowsfilter-diff"} {
		if p := f.ProxyPlugins[name]; p.Address != `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter` || p.Platform != "windows/amd64" {
			t.Errorf("proxy plugin %s = %+v", name, p)
		}
	}
	r, ok := f.Plugins.Runtime.Containerd.Runtimes["winproc"]
	if !ok {
		t.Fatal("no winproc runtime handler")
	}
	if r.RuntimeType != "io.containerd.winproc.v2" || r.Sandboxer != "podsandbox" || r.Snapshotter != "windowsfilter" || !r.DisablePauseImagePull {
		t.Errorf("winproc handler = %+v", r)
	}
	body, err := toml.Marshal(r.Options)
	if err != nil {
		t.Fatal(err)
	}
	if o, err := options.Decode(body); err != nil || o.PauseImage != PauseImage {
		t.Errorf("the shim reads the options as %+v, %v; want pause image %s", o, err, PauseImage)
	}
}

// containerd merges the fragment, imported as install.ps1 imports it, into
// a node's config without losing the node's own runtime handlers (checked
// with the pinned containerd's own loader: `containerd config dump`).
func TestFragmentMergesIntoNodeConfig(t *testing.T) {
	tools := os.Getenv("WINPROC_TOOLS")
	if tools == "" {
		t.Skip("WINPROC_TOOLS is not set: run through `make test`, or point it at `make tools`' directory")
	}
	dir := t.TempDir()
	fragment, err := Fragment(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FragmentFile), fragment, 0o644); err != nil {
		t.Fatal(err)
	}
	// A Windows node's config as the usual install guides leave it: runhcs
	// as the default handler, containerd's own differ; in containerd 2.0's
	// format (version 3) and 2.2's (version 4). The import line is what
	// install.ps1 adds.
	for _, version := range []string{"3", "4"} {
		main := `version = ` + version + `
imports = ['` + filepath.Join(dir, FragmentFile) + `']

[plugins]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = 'runhcs-wcow-process'
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runhcs-wcow-process]
      runtime_type = 'io.containerd.runhcs.v1'
  [plugins.'io.containerd.service.v1.diff-service']
    default = ['windows']
`
		if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(main), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(filepath.Join(tools, "containerd"), "-c", filepath.Join(dir, "config.toml"), "config", "dump").Output()
		if err != nil {
			t.Fatalf("containerd config dump (version %s): %v", version, err)
		}
		checkMerged(t, version, out)
	}
}

func checkMerged(t *testing.T, version string, out []byte) {
	t.Helper()
	var merged struct {
		ProxyPlugins map[string]struct{ Address string } `toml:"proxy_plugins"`
		Plugins      struct {
			Runtime struct {
				Containerd struct {
					Default  string `toml:"default_runtime_name"`
					Runtimes map[string]struct {
						RuntimeType string `toml:"runtime_type"`
					} `toml:"runtimes"`
				} `toml:"containerd"`
			} `toml:"io.containerd.cri.v1.runtime"`
			Diff struct {
				Default []string `toml:"default"`
			} `toml:"io.containerd.service.v1.diff-service"`
		} `toml:"plugins"`
	}
	if err := toml.Unmarshal(out, &merged); err != nil {
		t.Fatalf("version %s: containerd config dump is not TOML: %v\n%s", version, err, out)
	}
	c := merged.Plugins.Runtime.Containerd
	if c.Default != "runhcs-wcow-process" || c.Runtimes["runhcs-wcow-process"].RuntimeType != "io.containerd.runhcs.v1" {
		t.Errorf("version %s: the node's runhcs handler did not survive the merge: default %q, runtimes %v", version, c.Default, c.Runtimes)
	}
	if c.Runtimes["winproc"].RuntimeType != "io.containerd.winproc.v2" {
		t.Errorf("version %s: no winproc handler after the merge: %v", version, c.Runtimes)
	}
	for _, name := range []string{"windowsfilter", "windowsfilter-diff"} {
		if merged.ProxyPlugins[name].Address != `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter` {
			t.Errorf("version %s: proxy plugin %s after the merge: %+v", version, name, merged.ProxyPlugins[name])
		}
	}
	// The fragment leaves the node's differ chain alone.
	if d := merged.Plugins.Diff.Default; len(d) != 1 || d[0] != "windows" {
		t.Errorf("version %s: diff-service default after the merge = %v, want the node's own [windows]", version, d)
	}
}
