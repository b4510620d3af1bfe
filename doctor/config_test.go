package doctor

import (
	"io/fs"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/winproc/winproc/containerdconfig"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
)

// memFiles is a file system of config files.
type memFiles map[string]string

func (m memFiles) ReadFile(p string) ([]byte, error) {
	s, ok := m[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

func (m memFiles) Glob(pattern string) ([]string, error) {
	var out []string
	for p := range m {
		if ok, _ := filepath.Match(pattern, p); ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out, nil
}

func generated(t *testing.T, n containerdconfig.Node) string {
	t.Helper()
	b, err := containerdconfig.Generate(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func linuxNode() containerdconfig.Node {
	return containerdconfig.Node{
		OS: "linux", Root: "/r", State: "/s", Address: "/run/c.sock",
		SnapshotterAddress: "/run/snap.sock", Handler: "winproc", Sandboxer: "shim",
		Options: options.Options{PauseImage: "example.com/pause:1", HostBuild: "10.0.20348"},
	}
}

const configV2 = `
version = 2
[grpc]
  address = "/run/containerd/c17.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.example/pause:ltsc2022"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "windowsfilter"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.winproc]
      runtime_type = "io.containerd.winproc.v2"
      sandbox_mode = "shim"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.winproc.options]
        pause_image = "registry.example/pause:winproc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runhcs-wcow-process]
      runtime_type = "io.containerd.runhcs.v1"
[plugins."io.containerd.transfer.v1.local"]
  [[plugins."io.containerd.transfer.v1.local".unpack_config]]
    platform = "windows/amd64"
    snapshotter = "windowsfilter"
    differ = "windowsfilter-diff"
[proxy_plugins]
  [proxy_plugins.windowsfilter]
    type = "snapshot"
    address = '\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter'
    platform = "windows/amd64"
  [proxy_plugins.windowsfilter-diff]
    type = "diff"
    address = '\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter'
    platform = "windows/amd64"
`

const configV4 = `
version = 4
[plugins.'io.containerd.server.v1.grpc']
  address = "/run/containerd/v4.sock"
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.winproc]
  runtime_type = "io.containerd.winproc.v2"
  runtime_path = "/opt/winproc/containerd-shim-winproc-v2"
  sandboxer = "podsandbox"
  snapshotter = "windowsfilter"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.example/pause:3.10"
  [plugins.'io.containerd.cri.v1.images'.runtime_platforms.winproc]
    platform = "windows/amd64"
    snapshotter = "windowsfilter"
[plugins.'io.containerd.service.v1.diff-service']
  default = ["windowsfilter-diff", "walking"]
`

const configV1 = `
[plugins.cri.containerd.runtimes.winproc]
  runtime_type = "io.containerd.winproc.v2"
`

// configShape is a config's files and what LoadConfig makes of them.
type configShape struct {
	name    string
	files   memFiles
	want    Config
	options map[string]any
}

func TestDoctorLoadConfigShapes(t *testing.T) {
	for _, tc := range append(generatedShapes(t), writtenShapes()...) {
		t.Run(tc.name, func(t *testing.T) {
			path := "/c.toml"
			if _, ok := tc.files[path]; !ok {
				path = "/etc/containerd/config.toml"
			}
			c, err := LoadConfig(tc.files, path)
			if err != nil {
				t.Fatal(err)
			}
			if h, ok := c.Runtimes["winproc"]; ok {
				if tc.options != nil && !reflect.DeepEqual(h.Options, tc.options) {
					t.Errorf("winproc options = %v, want %v", h.Options, tc.options)
				}
				if len(h.PodAnnotations) > 0 && !reflect.DeepEqual(h.PodAnnotations, containerdnames.Annotations) {
					t.Errorf("winproc pod_annotations = %v, want the generator's %v", h.PodAnnotations, containerdnames.Annotations)
				}
				for name, rt := range c.Runtimes {
					rt.Options, rt.PodAnnotations = nil, nil
					c.Runtimes[name] = rt
				}
			}
			c.origin = nil
			if !reflect.DeepEqual(*c, tc.want) {
				t.Errorf("config:\n got %+v\nwant %+v", *c, tc.want)
			}
		})
	}
}

// generatedShapes are configs of containerdconfig's making, alone and
// imported into an operator's config.
func generatedShapes(t *testing.T) []configShape {
	return []configShape{
		{
			name:  "v3 from the generator (linux)",
			files: memFiles{"/c.toml": generated(t, linuxNode())},
			want: Config{
				Path: "/c.toml", Version: 3, Files: []string{"/c.toml"}, GRPCAddress: "/run/c.sock", State: "/s",
				ProxyPlugins: map[string]ProxyPlugin{
					"windowsfilter":      {Type: "snapshot", Address: "/run/snap.sock", Platform: "windows/amd64", Capabilities: []string{"rebase"}},
					"windowsfilter-diff": {Type: "diff", Address: "/run/snap.sock", Platform: "windows/amd64"},
				},
				Runtimes: map[string]Runtime{"winproc": {RuntimeType: "io.containerd.winproc.v2", Sandboxer: "shim", Snapshotter: "windowsfilter"}},
				RuntimePlatforms: map[string]RuntimePlatform{
					"winproc": {Platform: "windows/amd64", Snapshotter: "windowsfilter"},
				},
				UnpackRules:          []UnpackRule{{Platform: "windows/amd64", Snapshotter: "windowsfilter", Differ: "windowsfilter-diff"}},
				MaxConcurrentUnpacks: 3,
				DiffDefault:          []string{"windowsfilter-diff", "walking"},
			},
			options: map[string]any{"pause_image": "example.com/pause:1", "host_build": "10.0.20348"},
		},
		{
			name:  "v3 from the generator (windows fragment)",
			files: memFiles{"/c.toml": generated(t, containerdconfig.Windows())},
			want: Config{
				Path: "/c.toml", Version: 3, Files: []string{"/c.toml"},
				ProxyPlugins: map[string]ProxyPlugin{
					"windowsfilter":      {Type: "snapshot", Address: `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`, Platform: "windows/amd64", Root: `C:\ProgramData\winproc\snapshotter`},
					"windowsfilter-diff": {Type: "diff", Address: `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`, Platform: "windows/amd64"},
				},
				Runtimes:     map[string]Runtime{"winproc": {RuntimeType: "io.containerd.winproc.v2", Sandboxer: "podsandbox", Snapshotter: "windowsfilter"}},
				SandboxImage: options.DefaultPauseImage,
				RuntimePlatforms: map[string]RuntimePlatform{
					"winproc": {Platform: "windows/amd64", Snapshotter: "windowsfilter"},
				},
				UnpackRules: []UnpackRule{{Platform: "windows/amd64", Snapshotter: "windows", Differ: "windows"}, {Platform: "windows/amd64", Snapshotter: "windowsfilter", Differ: "windowsfilter-diff"}},
				// No default: containerd's own differ chain stays.
			},
		},
		{
			name: "imports: globbed, relative, a later plugin table replaces an earlier one whole",
			files: memFiles{
				"/etc/containerd/config.toml": `version = 3
imports = ["conf.d/*.toml", "/abs/extra.toml"]
[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[proxy_plugins.windowsfilter]
  type = "snapshot"
  address = "/old.sock"
`,
				"/etc/containerd/conf.d/10-winproc.toml": generated(t, containerdconfig.Node{OS: "linux", SnapshotterAddress: "/new.sock", Handler: "winproc", Sandboxer: "shim"}),
				"/abs/extra.toml": `version = 3
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs"]
`,
			},
			want: Config{
				Path: "/etc/containerd/config.toml", Version: 3,
				Files:           []string{"/etc/containerd/config.toml", "/etc/containerd/conf.d/10-winproc.toml", "/abs/extra.toml"},
				DisabledPlugins: []string{"io.containerd.snapshotter.v1.btrfs"},
				ProxyPlugins: map[string]ProxyPlugin{
					"windowsfilter":      {Type: "snapshot", Address: "/new.sock", Platform: "windows/amd64", Capabilities: []string{"rebase"}},
					"windowsfilter-diff": {Type: "diff", Address: "/new.sock", Platform: "windows/amd64"},
				},
				// runc is gone: the import's runtime plugin table replaced
				// the main file's.
				Runtimes: map[string]Runtime{"winproc": {RuntimeType: "io.containerd.winproc.v2", Sandboxer: "shim", Snapshotter: "windowsfilter"}},
				RuntimePlatforms: map[string]RuntimePlatform{
					"winproc": {Platform: "windows/amd64", Snapshotter: "windowsfilter"},
				},
				UnpackRules:          []UnpackRule{{Platform: "windows/amd64", Snapshotter: "windowsfilter", Differ: "windowsfilter-diff"}},
				MaxConcurrentUnpacks: 3,
				DiffDefault:          []string{"windowsfilter-diff", "walking"},
			},
		},
	}
}

// writtenShapes are configs of containerd's other versions, as operators
// write them.
func writtenShapes() []configShape {
	return []configShape{
		{
			name:  "v2 (containerd 1.7) read as containerd 2.x migrates it",
			files: memFiles{"/c.toml": configV2},
			want: Config{
				Path: "/c.toml", Version: 2, Files: []string{"/c.toml"}, GRPCAddress: "/run/containerd/c17.sock",
				ProxyPlugins: map[string]ProxyPlugin{
					"windowsfilter":      {Type: "snapshot", Address: `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`, Platform: "windows/amd64"},
					"windowsfilter-diff": {Type: "diff", Address: `\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`, Platform: "windows/amd64"},
				},
				Runtimes: map[string]Runtime{
					"winproc":             {RuntimeType: "io.containerd.winproc.v2", Sandboxer: "shim"},
					"runhcs-wcow-process": {RuntimeType: "io.containerd.runhcs.v1"},
				},
				Snapshotter:      "windowsfilter",
				SandboxImage:     "registry.example/pause:ltsc2022",
				RuntimePlatforms: map[string]RuntimePlatform{},
				UnpackRules:      []UnpackRule{{Platform: "windows/amd64", Snapshotter: "windowsfilter", Differ: "windowsfilter-diff"}},
			},
			options: map[string]any{"pause_image": "registry.example/pause:winproc"},
		},
		{
			name:  "v4 (containerd 2.4): server plugins",
			files: memFiles{"/c.toml": configV4},
			want: Config{
				Path: "/c.toml", Version: 4, Files: []string{"/c.toml"}, GRPCAddress: "/run/containerd/v4.sock",
				ProxyPlugins: map[string]ProxyPlugin{},
				Runtimes: map[string]Runtime{"winproc": {RuntimeType: "io.containerd.winproc.v2", RuntimePath: "/opt/winproc/containerd-shim-winproc-v2",
					Sandboxer: "podsandbox", Snapshotter: "windowsfilter"}},
				Snapshotter:      "overlayfs",
				SandboxImage:     "registry.example/pause:3.10",
				RuntimePlatforms: map[string]RuntimePlatform{"winproc": {Platform: "windows/amd64", Snapshotter: "windowsfilter"}},
				DiffDefault:      []string{"windowsfilter-diff", "walking"},
			},
		},
		{
			name:  "v1: plugins.cri",
			files: memFiles{"/c.toml": configV1},
			want: Config{
				Path: "/c.toml", Version: 1, Files: []string{"/c.toml"},
				ProxyPlugins:     map[string]ProxyPlugin{},
				Runtimes:         map[string]Runtime{"winproc": {RuntimeType: "io.containerd.winproc.v2"}},
				RuntimePlatforms: map[string]RuntimePlatform{},
			},
		},
	}
}

func TestDoctorLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files memFiles
		want  string
	}{
		{"missing", memFiles{}, "file does not exist"},
		{"not TOML", memFiles{"/c.toml": "version = = 3"}, "not valid TOML"},
		{"bad version", memFiles{"/c.toml": `version = "three"`}, "not a config version"},
		{"missing import", memFiles{"/c.toml": `version = 3
imports = ["/nothere.toml"]`}, "import /nothere.toml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(tc.files, "/c.toml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadConfig: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestDoctorShimOptions(t *testing.T) {
	o, err := Runtime{}.ShimOptions()
	if err != nil || o.PauseImage != options.DefaultPauseImage {
		t.Errorf("no options: %+v, %v; want the default pause image", o, err)
	}
	o, err = Runtime{Options: map[string]any{"pause_image": "p:1", "host_build": "10.0.17763"}}.ShimOptions()
	if err != nil || o.PauseImage != "p:1" || o.HostBuild != "10.0.17763" {
		t.Errorf("options: %+v, %v", o, err)
	}
	if _, err := (Runtime{Options: map[string]any{"pause_imag": "typo"}}).ShimOptions(); err == nil {
		t.Error("a misspelt option was accepted; the shim refuses it")
	}
}

func TestDoctorRuntimeTable(t *testing.T) {
	for _, tc := range []struct {
		version int
		handler string
		want    string
	}{
		{2, "winproc", `plugins."io.containerd.grpc.v1.cri".containerd.runtimes.winproc`},
		{3, "winproc", `plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.winproc`},
		{4, "win.proc", `plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes."win.proc"`},
	} {
		if got := (&Config{Version: tc.version}).RuntimeTable(tc.handler); got != tc.want {
			t.Errorf("version %d: %s, want %s", tc.version, got, tc.want)
		}
	}
}
