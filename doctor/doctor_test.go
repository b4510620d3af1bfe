package doctor

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	apitypes "github.com/containerd/containerd/api/types"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/protobuf/proto"

	"github.com/winproc/winproc/containerdconfig"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// fakeSystem is a node for Run.
type fakeSystem struct {
	goos      string
	files     memFiles
	onPath    map[string]string // LookPath results
	regular   map[string]bool
	shimOut   map[string][]byte // ShimInfo output by path
	listening map[string]bool
	host      *winbuild.Version
	cd        *fakeContainerd
	access    map[string]DirAccess // DirAccess by path; others do not exist
	accessErr error                // DirAccess's error for every path
	leftovers *fakeLeftovers
	services  *fakeServices // nil: no service manager
}

func (s *fakeSystem) GOOS() string { return s.goos }
func (s *fakeSystem) DirAccess(p string) (DirAccess, error) {
	if s.accessErr != nil {
		return DirAccess{}, s.accessErr
	}
	a, ok := s.access[p]
	if !ok {
		return DirAccess{}, fs.ErrNotExist
	}
	return a, nil
}
func (s *fakeSystem) Getenv(string) string                  { return "" }
func (s *fakeSystem) ReadFile(p string) ([]byte, error)     { return s.files.ReadFile(p) }
func (s *fakeSystem) Glob(p string) ([]string, error)       { return s.files.Glob(p) }
func (s *fakeSystem) IsFile(p string) bool                  { return s.regular[p] }
func (s *fakeSystem) Containerd(string) (Containerd, error) { return s.cd, nil }
func (s *fakeSystem) Leftovers() Leftovers {
	if s.leftovers == nil {
		return nil // the check does not run
	}
	return s.leftovers
}

func (s *fakeSystem) Services() Services {
	if s.services == nil {
		return nil
	}
	return s.services
}

func (s *fakeSystem) LookPath(f string) (string, error) {
	if p, ok := s.onPath[f]; ok {
		return p, nil
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", f)
}

func (s *fakeSystem) ShimInfo(_ context.Context, p string) ([]byte, error) {
	if out, ok := s.shimOut[p]; ok {
		return out, nil
	}
	return nil, &fs.PathError{Op: "fork/exec", Path: p, Err: fs.ErrNotExist}
}

func (s *fakeSystem) Dial(_ context.Context, address string) error {
	if s.listening[address] {
		return nil
	}
	return fmt.Errorf("dial unix %s: connect: connection refused", address)
}

func (s *fakeSystem) HostBuild() (winbuild.Version, error) {
	if s.host != nil {
		return *s.host, nil
	}
	return winbuild.Version{}, errdefs.ErrNotImplemented
}

// fakeContainerd is containerd for Run.
type fakeContainerd struct {
	down       bool
	plugins    []Plugin
	runtimeErr error
	handlers   []string
	images     map[string]ocispec.Descriptor
	blobs      blobs
	snapshots  map[string]bool // snapshotter + "/" + key
	tasks      map[string][]string
	// pauseRootfs are the shim's pause rootfs snapshots; released those
	// ReleasePauseRootfs removed.
	pauseRootfs []PauseRootfs
	released    []string
}

func (c *fakeContainerd) PauseRootfs(_ context.Context, snapshotter string) ([]PauseRootfs, error) {
	if c.down {
		return nil, c.unavailable()
	}
	if snapshotter != "windowsfilter" {
		return nil, fmt.Errorf("snapshotter %q", snapshotter)
	}
	return c.pauseRootfs, nil
}

func (c *fakeContainerd) ReleasePauseRootfs(ctx context.Context, _ string, r PauseRootfs) error {
	if _, ok := ctx.Deadline(); !ok {
		return errors.New("released without a deadline")
	}
	c.released = append(c.released, r.Namespace+"/"+r.Sandbox)
	return nil
}

func (c *fakeContainerd) Close() error { return nil }

func (c *fakeContainerd) unavailable() error {
	return fmt.Errorf("connection error: %w", errdefs.ErrUnavailable)
}

func (c *fakeContainerd) Version(context.Context) (string, string, error) {
	if c.down {
		return "", "", c.unavailable()
	}
	return "v2.4.2", "abc", nil
}

func (c *fakeContainerd) Plugins(_ context.Context, filter string) ([]Plugin, error) {
	var out []Plugin
	for _, p := range c.plugins {
		if strings.Contains(filter, fmt.Sprintf("type==%q", p.Type)) && strings.Contains(filter, fmt.Sprintf("id==%q", p.ID)) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (c *fakeContainerd) RuntimeInfo(context.Context, string) (ShimInfo, error) {
	if c.down {
		return ShimInfo{}, c.unavailable()
	}
	if c.runtimeErr != nil {
		return ShimInfo{}, c.runtimeErr
	}
	return ShimInfo{Name: runtimeType, Version: "v0.1"}, nil
}

func (c *fakeContainerd) RuntimeHandlers(context.Context) ([]string, error) { return c.handlers, nil }

func (c *fakeContainerd) ImageTarget(_ context.Context, ns, name string) (ocispec.Descriptor, error) {
	if d, ok := c.images[ns+"/"+name]; ok {
		return d, nil
	}
	return ocispec.Descriptor{}, fmt.Errorf("image %q: %w", name, errdefs.ErrNotFound)
}

func (c *fakeContainerd) Content(string) content.Provider { return c.blobs }

// blobs is a content store at the seam.
type blobs map[digest.Digest][]byte

func (b blobs) ReaderAt(_ context.Context, d ocispec.Descriptor) (content.ReaderAt, error) {
	if p, ok := b[d.Digest]; ok {
		return blobReader{bytes.NewReader(p)}, nil
	}
	return nil, fmt.Errorf("content digest %s: %w", d.Digest, errdefs.ErrNotFound)
}

type blobReader struct{ *bytes.Reader }

func (blobReader) Close() error { return nil }

func (c *fakeContainerd) Tasks(_ context.Context, ns string) ([]string, error) {
	if c.down {
		return nil, c.unavailable()
	}
	if ns != "" {
		return c.tasks[ns], nil
	}
	var all []string
	for _, ids := range c.tasks {
		all = append(all, ids...)
	}
	return all, nil
}

func (c *fakeContainerd) StatSnapshot(_ context.Context, _, snapshotter, key string) error {
	if c.snapshots[snapshotter+"/"+key] {
		return nil
	}
	return fmt.Errorf("snapshot %s: %w", key, errdefs.ErrNotFound)
}

func (c *fakeContainerd) put(t *testing.T, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	d := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	c.blobs[d.Digest] = b
	return d
}

// image stores a Windows image of layer tars (bottom first, gzipped) and
// returns its manifest's descriptor; unpacked adds its snapshot.
func (c *fakeContainerd) image(t *testing.T, osVersion string, entrypoint []string, unpacked bool, layers ...[]byte) ocispec.Descriptor {
	t.Helper()
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest}
	m.SchemaVersion = 2
	cfg := ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}}
	cfg.RootFS.Type = "layers"
	cfg.Config.Entrypoint = entrypoint
	for _, l := range layers {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(l)
		zw.Close()
		m.Layers = append(m.Layers, c.put(t, ocispec.MediaTypeImageLayerGzip, gz.Bytes()))
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, digest.FromBytes(l))
	}
	m.Config = c.put(t, ocispec.MediaTypeImageConfig, cfg)
	if unpacked {
		c.snapshots[snapshotterName+"/"+identity.ChainID(cfg.RootFS.DiffIDs).String()] = true
	}
	d := c.put(t, ocispec.MediaTypeImageManifest, m)
	d.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}
	return d
}

const pauseRef = "example.com/winproc/pause:test"

var pauseLayers = [][]entry{
	{"Files/", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/winproc-base.txt", "Hives/", "Hives/SOFTWARE_BASE"},
	{"Files/", "Files/pause.exe", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/wincat.exe"},
}

// healthy is a node where every check passes.
func healthy(t *testing.T) (*fakeSystem, Options) {
	t.Helper()
	config := generated(t, containerdconfig.Node{
		OS: "linux", Address: "/run/c.sock", SnapshotterAddress: "/run/snap.sock", SnapshotterRoot: "/var/lib/winproc-snapshotter",
		Handler: "winproc", Sandboxer: "shim", DisablePauseImagePull: true,
		Options: options.Options{PauseImage: pauseRef},
	})
	info, err := proto.Marshal(&apitypes.RuntimeInfo{Name: runtimeType, Version: &apitypes.RuntimeVersion{Version: "v0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	cd := &fakeContainerd{
		plugins: []Plugin{
			{Type: "io.containerd.snapshotter.v1", ID: "windowsfilter", Platforms: []string{"windows/amd64"}},
			{Type: "io.containerd.differ.v1", ID: "windowsfilter-diff", Platforms: []string{"windows/amd64"}},
		},
		handlers:  []string{"", "winproc"},
		images:    map[string]ocispec.Descriptor{},
		blobs:     map[digest.Digest][]byte{},
		snapshots: map[string]bool{},
	}
	var tars [][]byte
	for _, l := range pauseLayers {
		tars = append(tars, layerTar(t, l...))
	}
	cd.images["k8s.io/"+pauseRef] = cd.image(t, "10.0.20348.1", []string{`C:\pause.exe`}, true, tars...)
	sys := &fakeSystem{
		goos:      "linux",
		files:     memFiles{"/etc/containerd/config.toml": config},
		onPath:    map[string]string{"containerd-shim-winproc-v2": "/usr/local/bin/containerd-shim-winproc-v2"},
		regular:   map[string]bool{},
		shimOut:   map[string][]byte{"/usr/local/bin/containerd-shim-winproc-v2": info},
		listening: map[string]bool{"/run/snap.sock": true},
		cd:        cd,
		access:    map[string]DirAccess{"/var/lib/winproc-snapshotter": {}},
	}
	return sys, Options{System: sys, ConfigPath: "/etc/containerd/config.toml"}
}

func TestDoctorRunHealthy(t *testing.T) {
	_, o := healthy(t)
	r := Run(context.Background(), o)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	if !r.OK {
		t.Fatalf("not OK:\n%s", text.String())
	}
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
		if c.Status != OK || len(c.Fix) > 0 {
			t.Errorf("%s: %s %q, fix %q", c.Name, c.Status, c.Summary, c.Fix)
		}
	}
	want := []string{CheckConfig, CheckHandler, CheckProxyPlugins, CheckUnpack, CheckShim, CheckContainerd, CheckSnapshotter, CheckPlugins, CheckPauseImage, CheckStateDirs, CheckHostProcess, CheckTerminations, CheckShutdown}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("checks %v, want %v", names, want)
	}
	if r.Address != "/run/c.sock" {
		t.Errorf("address %q: want the config's grpc address", r.Address)
	}
	if r.HostBuild != "10.0.20348 (ltsc2022), from the emulation's default" {
		t.Errorf("host build %q", r.HostBuild)
	}
	for _, want := range []string{
		"OK    pause image    example.com/winproc/pause:test: windows/amd64 10.0.20348.1, snapshotter windowsfilter, has C:\\pause.exe and C:\\Windows\\System32\\wincat.exe\n",
		"OK    handler        winproc: runtime_type io.containerd.winproc.v2, sandboxer shim, snapshotter windowsfilter\n",
		"      pause_image example.com/winproc/pause:test\n",
		"OK    state dirs     administrators only: /var/lib/winproc-snapshotter\n",
		"\n13 checks: 0 failed, 0 warnings\n",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !back.OK || len(back.Checks) != len(r.Checks) || back.Checks[0].Status != OK {
		t.Errorf("JSON round trip: %+v", back)
	}
}

// checkFinding fails t unless r has the check name with status, a summary
// containing summary and a fix containing fix; it returns the check.
func checkFinding(t *testing.T, r *Report, name string, status Status, summary, fix string) *Result {
	t.Helper()
	c := r.Check(name)
	if c == nil {
		t.Fatalf("no %s check in %+v", name, r.Checks)
	}
	var text bytes.Buffer
	r.WriteText(&text)
	if c.Status != status || !strings.Contains(c.Summary, summary) {
		t.Errorf("%s: %s %q\nwant %s %q\n%s", name, c.Status, c.Summary, status, summary, text.String())
	}
	if got := strings.Join(c.Fix, "\n"); !strings.Contains(got, fix) {
		t.Errorf("%s fix:\n%s\nlacks:\n%s", name, got, fix)
	}
	return c
}

// findingCase is a change to a healthy node and the finding it makes.
type findingCase struct {
	name   string
	change func(s *fakeSystem, o *Options)
	check  string
	status Status
	// summary and fix hold substrings of the check's summary and fix.
	summary, fix string
}

// runFindingCases runs doctor on a healthy node changed by each case and
// checks the finding, that a problem has a fix, and the report's verdict.
func runFindingCases(t *testing.T, cases []findingCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, o := healthy(t)
			tc.change(s, &o)
			r := Run(context.Background(), o)
			c := checkFinding(t, r, tc.check, tc.status, tc.summary, tc.fix)
			if tc.status != OK && len(c.Fix) == 0 && tc.check != CheckPauseImage {
				t.Errorf("%s is %s without a fix", tc.check, c.Status)
			}
			if r.OK != (len(r.Failed()) == 0) {
				t.Errorf("report OK %v with %d failures", r.OK, len(r.Failed()))
			}
		})
	}
}

// Findings of the node's config, handler, shim, containerd, snapshotter
// and plugins.
func TestDoctorRunFindings(t *testing.T) {
	runFindingCases(t, []findingCase{
		{"handler not registered", func(s *fakeSystem, o *Options) { o.Handler = "nothere" },
			CheckHandler, Fail, `runtime handler "nothere" is not registered in /etc/containerd/config.toml`,
			"add the handler table to /etc/containerd/config.toml (package containerdconfig generates it), then systemctl restart containerd:\n" +
				"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nothere]\n  runtime_type = \"io.containerd.winproc.v2\""},
		{"handler not registered: the pause image is not checked", func(s *fakeSystem, o *Options) { o.Handler = "nothere" },
			CheckPauseImage, Warn, `not checked: the handler "nothere" is not registered`, ""},
		{"handler not registered: containerd's CRI lacks it too", func(s *fakeSystem, o *Options) { o.Handler = "nothere" },
			CheckContainerd, OK, "containerd v2.4.2 (abc) at /run/c.sock", ""},
		{"a version 2 config (containerd 1.7)", func(s *fakeSystem, o *Options) {
			s.files["/etc/containerd/config.toml"] = configV2
			s.listening[`\\.\pipe\ProtectedPrefix\Administrators\winproc-snapshotter`] = true
		}, CheckHandler, OK, "winproc: runtime_type io.containerd.winproc.v2, sandboxer shim, snapshotter windowsfilter (CRI's default)", ""},
		{"a version 2 config: the diff service", func(s *fakeSystem, o *Options) { s.files["/etc/containerd/config.toml"] = configV2 },
			CheckUnpack, Warn, "the diff service does not try windowsfilter-diff (no default set)", `set in [plugins."io.containerd.service.v1.diff-service"]: default = ["windowsfilter-diff", "walking"]`},
		{"podsandbox: containerd's sandbox image", func(s *fakeSystem, o *Options) { s.files["/etc/containerd/config.toml"] = configV4 },
			CheckPauseImage, Fail, `pause image "registry.example/pause:3.10" is not in containerd`, "-ref registry.example/pause:3.10"},
		{"runtime_path: the shim containerd runs", func(s *fakeSystem, o *Options) { s.files["/etc/containerd/config.toml"] = configV4 },
			CheckShim, Fail, "/opt/winproc/containerd-shim-winproc-v2 (the handler's runtime_path) does not answer -info", "install"},
		{"the snapshotter's root is not exported", func(s *fakeSystem, o *Options) {
			s.files["/etc/containerd/config.toml"] = strings.Replace(s.files["/etc/containerd/config.toml"], "root = '/var/lib/winproc-snapshotter'", "", 1)
		}, CheckProxyPlugins, Warn, "exports no root", `exports = { root = "/var/lib/winproc-snapshotter" }`},
		{"no config", func(s *fakeSystem, o *Options) { o.ConfigPath = "/nothere.toml" },
			CheckConfig, Fail, "cannot read containerd's config", "pass --config"},
		{"another runtime type", func(s *fakeSystem, o *Options) {
			s.files["/etc/containerd/config.toml"] = strings.Replace(s.files["/etc/containerd/config.toml"], `runtime_type = 'io.containerd.winproc.v2'`, `runtime_type = 'io.containerd.runhcs.v1'`, 1)
		}, CheckHandler, Fail, `has runtime_type = "io.containerd.runhcs.v1"`, `set runtime_type = "io.containerd.winproc.v2"`},
		{"a misspelt option", func(s *fakeSystem, o *Options) {
			s.files["/etc/containerd/config.toml"] = strings.Replace(s.files["/etc/containerd/config.toml"], `pause_image =`, `pause_imag =`, 1)
		}, CheckHandler, Fail, "the shim refuses the handler's options", "correct or remove the key"},
		{"no unpack rule", func(s *fakeSystem, o *Options) {
			cfg := s.files["/etc/containerd/config.toml"]
			i := strings.LastIndex(cfg, "platform = 'windows/amd64'") // the unpack rule's
			s.files["/etc/containerd/config.toml"] = cfg[:i] + "platform = 'linux/amd64'" + cfg[i+len("platform = 'windows/amd64'"):]
		}, CheckUnpack, Fail, "no unpack rule for windows/amd64", "[[plugins.'io.containerd.transfer.v1.local'.unpack_config]]"},
		{"shim not installed", func(s *fakeSystem, o *Options) { s.onPath = nil },
			CheckShim, Fail, "containerd-shim-winproc-v2 is not on PATH or beside containerd", "install containerd-shim-winproc-v2"},
		{"shim beside containerd", func(s *fakeSystem, o *Options) {
			s.onPath = map[string]string{"containerd": "/opt/cd/bin/containerd"}
			s.regular["/opt/cd/bin/containerd-shim-winproc-v2"] = true
			s.shimOut["/opt/cd/bin/containerd-shim-winproc-v2"] = s.shimOut["/usr/local/bin/containerd-shim-winproc-v2"]
		}, CheckShim, OK, "/opt/cd/bin/containerd-shim-winproc-v2 (beside containerd) answers -info", ""},
		{"shim is another runtime", func(s *fakeSystem, o *Options) {
			b, _ := proto.Marshal(&apitypes.RuntimeInfo{Name: "io.containerd.runc.v2"})
			s.shimOut["/usr/local/bin/containerd-shim-winproc-v2"] = b
		}, CheckShim, Fail, `is runtime "io.containerd.runc.v2"`, "install"},
		{"containerd cannot find the shim", func(s *fakeSystem, o *Options) {
			s.cd.runtimeErr = fmt.Errorf("runtime binary not installed: %w", errdefs.ErrNotFound)
		}, CheckShim, Fail, "containerd cannot run the shim of io.containerd.winproc.v2", "containerd looks on its own PATH"},
		{"containerd down", func(s *fakeSystem, o *Options) { s.cd.down = true },
			CheckContainerd, Fail, "containerd does not answer at /run/c.sock", "systemctl start containerd"},
		{"containerd down: the pause image is not checked", func(s *fakeSystem, o *Options) { s.cd.down = true },
			CheckPauseImage, Warn, "not checked: example.com/winproc/pause:test: containerd did not answer", ""},
		{"CRI without the handler", func(s *fakeSystem, o *Options) { s.cd.handlers = []string{"", "runc"} },
			CheckContainerd, Fail, `containerd's CRI does not serve handler "winproc" (it serves (default), runc)`, "systemctl restart containerd, and make sure it reads"},
		{"snapshotter down", func(s *fakeSystem, o *Options) { s.listening = nil },
			CheckSnapshotter, Fail, "nothing answers at /run/snap.sock", "start winproc-snapshotter -address /run/snap.sock"},
		{"plugin failed to load", func(s *fakeSystem, o *Options) { s.cd.plugins[0].InitErr = "boom" },
			CheckPlugins, Fail, "containerd could not load io.containerd.snapshotter.v1 plugin windowsfilter: boom", "start winproc-snapshotter first"},
		{"plugin missing", func(s *fakeSystem, o *Options) { s.cd.plugins = s.cd.plugins[1:] },
			CheckPlugins, Fail, "containerd has no io.containerd.snapshotter.v1 plugin windowsfilter", "make sure it reads"},
	})
}

// Findings of the pause image, the host's build and the RuntimeClasses.
func TestDoctorRunImageFindings(t *testing.T) {
	tars := func(layers ...[]entry) [][]byte {
		var out [][]byte
		for _, l := range layers {
			out = append(out, layerTar(t, l...))
		}
		return out
	}
	runFindingCases(t, []findingCase{
		{"pause image missing", func(s *fakeSystem, o *Options) { s.cd.images = map[string]ocispec.Descriptor{} },
			CheckPauseImage, Fail, `pause image "example.com/winproc/pause:test" is not in containerd (namespace k8s.io)`,
			"winproc image pause -pause-exe pause.exe -wincat-exe wincat.exe -os-version 10.0.20348.1 -ref example.com/winproc/pause:test -output pause.tar\n" +
				"and import it: ctr -a /run/c.sock -n k8s.io images import --platform windows/amd64 --snapshotter windowsfilter pause.tar"},
		{"pause image for ltsc2019", func(s *fakeSystem, o *Options) {
			s.cd.images["k8s.io/"+pauseRef] = s.cd.image(t, "10.0.17763.1", []string{`C:\pause.exe`}, false, tars(pauseLayers...)...)
		}, CheckPauseImage, Fail, `image "example.com/winproc/pause:test" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022)`, "-os-version 10.0.20348.1"},
		{"pause image without os.version", func(s *fakeSystem, o *Options) {
			s.cd.images["k8s.io/"+pauseRef] = s.cd.image(t, "", []string{`C:\pause.exe`}, true, tars(pauseLayers...)...)
		}, CheckPauseImage, Warn, "does not declare an os.version", "winproc image pause"},
		{"pause image without wincat", func(s *fakeSystem, o *Options) {
			s.cd.images["k8s.io/"+pauseRef] = s.cd.image(t, "10.0.20348.1", []string{`C:\pause.exe`}, true, tars(pauseLayers[0], []entry{"Files/", "Files/pause.exe"})...)
		}, CheckPauseImage, Fail, `pause image "example.com/winproc/pause:test" lacks C:\Windows\System32\wincat.exe (port-forward runs it)`, "winproc image pause"},
		{"wincat deleted by a later layer", func(s *fakeSystem, o *Options) {
			s.cd.images["k8s.io/"+pauseRef] = s.cd.image(t, "10.0.20348.1", []string{`C:\pause.exe`}, true,
				tars(pauseLayers[0], pauseLayers[1], []entry{"Files/", "Files/Windows/", "Files/Windows/System32/", "Files/Windows/System32/.wh.wincat.exe"})...)
		}, CheckPauseImage, Fail, `lacks C:\Windows\System32\wincat.exe`, ""},
		{"entrypoint missing", func(s *fakeSystem, o *Options) {
			s.cd.images["k8s.io/"+pauseRef] = s.cd.image(t, "10.0.20348.1", []string{`C:\app\pause.exe`}, true, tars(pauseLayers...)...)
		}, CheckPauseImage, Fail, `lacks its entrypoint C:\app\pause.exe`, ""},
		{"not unpacked", func(s *fakeSystem, o *Options) { s.cd.snapshots = map[string]bool{} },
			CheckPauseImage, Fail, "is not unpacked for snapshotter windowsfilter", "import its archive again, unpacked (no --no-unpack): ctr -a /run/c.sock -n k8s.io images import --platform windows/amd64 --snapshotter windowsfilter ARCHIVE"},
		{"an index: the host's build is chosen", func(s *fakeSystem, o *Options) {
			old := s.cd.image(t, "10.0.17763.1", []string{`C:\pause.exe`}, false, tars(pauseLayers...)...)
			cur := s.cd.image(t, "10.0.20348.2", []string{`C:\pause.exe`}, true, tars(pauseLayers[0], pauseLayers[1], []entry{"Files/", "Files/x"})...)
			s.cd.images["k8s.io/"+pauseRef] = s.cd.put(t, ocispec.MediaTypeImageIndex, ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{old, cur}})
		}, CheckPauseImage, OK, "windows/amd64 10.0.20348.2", ""},
		{"an index without the host's build", func(s *fakeSystem, o *Options) {
			old := s.cd.image(t, "10.0.17763.1", []string{`C:\pause.exe`}, false, tars(pauseLayers...)...)
			s.cd.images["k8s.io/"+pauseRef] = s.cd.put(t, ocispec.MediaTypeImageIndex, ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{old}})
		}, CheckPauseImage, Fail, "no manifest for windows/amd64 that can run on this host", "or set pause_image in [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.winproc.options]"},
		{"--host-build", func(s *fakeSystem, o *Options) { o.HostBuild = "10.0.17763" },
			CheckPauseImage, Fail, "this host is 10.0.17763 (ltsc2019)", "-os-version 10.0.17763.1"},
		{"an ltsc2022 image runs on an ltsc2025 host", func(s *fakeSystem, o *Options) { o.HostBuild = "10.0.26100" },
			CheckPauseImage, OK, "windows/amd64 10.0.20348.1", ""},
		{"bad --host-build", func(s *fakeSystem, o *Options) { o.HostBuild = "ltsc2022" },
			CheckPauseImage, Fail, "the host build is unknown: --host-build", "pass --host-build"},
		{"runtime class for another build", func(s *fakeSystem, o *Options) {
			s.files["/rc.yaml"] = strings.Replace(twoClasses, `"10.0.20348"`, `"10.0.26100"`, 1)
			o.RuntimeClasses = []string{"/rc.yaml"}
		}, CheckRuntimeClass, Fail, `no RuntimeClass for handler "winproc" selects this node's build 10.0.20348 (ltsc2022)`, "winproc runtimeclass -handler winproc -build 10.0.20348 | kubectl apply -f -"},
		{"runtime classes fine", func(s *fakeSystem, o *Options) {
			s.files["/rc.yaml"] = twoClasses
			o.RuntimeClasses = []string{"/rc.yaml"}
		}, CheckRuntimeClass, OK, "RuntimeClass winproc-ltsc2022 (handler winproc) selects 10.0.20348 (ltsc2022)", ""},
		{"runtime class file missing", func(s *fakeSystem, o *Options) { o.RuntimeClasses = []string{"/nothere.yaml"} },
			CheckRuntimeClass, Fail, "/nothere.yaml: open /nothere.yaml: file does not exist", ""},
	})
}

// On Windows the host build comes from the system, the shim is looked up
// beside containerd.exe and the fixes use Windows commands.
func TestDoctorRunWindows(t *testing.T) {
	s, o := healthy(t)
	s.goos = "windows"
	s.host = &winbuild.Version{Major: 10, Minor: 0, Build: 20348, Revision: 2227}
	s.onPath = map[string]string{"containerd.exe": `C:\Program Files\containerd\bin\containerd.exe`}
	s.cd.images = map[string]ocispec.Descriptor{}
	s.listening = nil
	r := Run(context.Background(), o)
	if r.HostBuild != "10.0.20348 (ltsc2022), from this host" {
		t.Errorf("host build %q", r.HostBuild)
	}
	shim := r.Check(CheckShim)
	if shim.Status != Fail || !strings.Contains(shim.Summary, "containerd-shim-winproc-v2.exe is not on PATH or beside containerd") ||
		!strings.Contains(strings.Join(shim.Details, "\n"), `C:\Program Files\containerd\bin`) {
		t.Errorf("shim: %+v", shim)
	}
	if fix := strings.Join(r.Check(CheckPauseImage).Fix, "\n"); !strings.Contains(fix, "-base-layout NANOSERVER_OCI_LAYOUT -host-build 10.0.20348") {
		t.Errorf("pause image fix: %s", fix)
	}
	if fix := strings.Join(r.Check(CheckSnapshotter).Fix, "\n"); !strings.Contains(fix, "winproc-snapshotter.exe -address /run/snap.sock") {
		t.Errorf("snapshotter fix: %s", fix)
	}
	// The healthy config's handler is in shim mode, which hides pods from
	// the Windows CRI's pod stats.
	if h := r.Check(CheckHandler); h.Status != Warn || !strings.Contains(h.Summary, "hides this handler's pods from the kubelet's pod stats") ||
		!strings.Contains(strings.Join(h.Fix, "\n"), `set sandboxer = "podsandbox"`) {
		t.Errorf("handler in shim mode on Windows: %+v", h)
	}
	if got := defaultConfigPathFor("windows", func(string) string { return "" }); got != `C:\Program Files\containerd\config.toml` {
		t.Errorf("default config path on Windows: %s", got)
	}
	if got := defaultAddress("windows"); got != `\\.\pipe\containerd-containerd` {
		t.Errorf("default address on Windows: %s", got)
	}
}

func TestDoctorApplyIssues(t *testing.T) {
	r := Result{Name: "x", Summary: "found things"}
	applyIssues(&r, []issue{
		{Warn, "a warning", []string{"fix w", "shared"}},
		{Fail, "a failure", []string{"fix f", "shared"}},
	})
	if r.Status != Fail || r.Summary != "a failure" {
		t.Errorf("status %s %q", r.Status, r.Summary)
	}
	if want := []string{"found things", "WARN: a warning"}; fmt.Sprint(r.Details) != fmt.Sprint(want) {
		t.Errorf("details %q, want %q", r.Details, want)
	}
	if want := []string{"fix w", "shared", "fix f"}; fmt.Sprint(r.Fix) != fmt.Sprint(want) {
		t.Errorf("fix %q, want %q", r.Fix, want)
	}
	ok := Result{Summary: "fine"}
	applyIssues(&ok, nil)
	if ok.Status != OK {
		t.Errorf("no issues: %s", ok.Status)
	}
}

func TestDoctorDecodeShimInfo(t *testing.T) {
	b, _ := proto.Marshal(&apitypes.RuntimeInfo{Name: runtimeType, Version: &apitypes.RuntimeVersion{Version: "v1", Revision: "r"}})
	info, err := decodeShimInfo(b)
	if err != nil || info != (ShimInfo{Name: runtimeType, Version: "v1", Revision: "r"}) {
		t.Errorf("decodeShimInfo: %+v, %v", info, err)
	}
	if _, err := decodeShimInfo([]byte("containerd-shim-winproc-v2: flag provided but not defined: -info\n")); err == nil {
		t.Error("text decoded as RuntimeInfo")
	}
}
