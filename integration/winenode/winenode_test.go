//go:build linux

package winenode

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	taskv3 "github.com/containerd/containerd/api/runtime/task/v3"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	"google.golang.org/protobuf/proto"

	"github.com/winproc/winproc/install"
	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/winimage"
)

// bins are the binaries TestMain built, empty when Wine's tools are not set
// up (the tests skip then).
var bins Binaries

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tools := os.Getenv("WINPROC_TOOLS")
	if tools == "" || os.Getenv(winetest.PrefixEnv) == "" {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "winenode-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := node.BuildBinaries(dir, "windows", "containerd-shim-winproc-v2", "winproc-snapshotter", "winproc", "pause", "wincat", "winproc-testapp"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	build := exec.Command("go", "build", "-o", dir+"/", "./shimclient", "./cniplugin")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build shimclient and cniplugin: %v\n%s", err, out)
		return 1
	}
	if err := BuildStandins(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	bins = Binaries{
		Containerd: filepath.Join(tools, "windows"),
		Project:    dir,
		Crictl:     filepath.Join(tools, "windows", "crictl.exe"),
		Standins:   dir,
		Runhcs:     filepath.Join(tools, "windows", RunhcsShim),
	}
	return m.Run()
}

func startNode(t *testing.T) *Node {
	t.Helper()
	return startNodeWith(t, Options{})
}

func startNodeWith(t *testing.T, opts Options) *Node {
	t.Helper()
	if bins.Project == "" {
		t.Skipf("WINPROC_TOOLS and %s are not set; run through `make test` or `make wine-node`", winetest.PrefixEnv)
	}
	if _, err := os.Stat(filepath.Join(bins.Containerd, "containerd.exe")); err != nil {
		t.Fatalf("no containerd.exe for Windows (build/tools.sh builds it): %v", err)
	}
	return StartWith(t, bins, opts)
}

// ctr runs ctr.exe and fails the test if it fails.
func ctr(t *testing.T, n *Node, args ...string) string {
	t.Helper()
	out, err := n.Ctr(args...)
	if err != nil {
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// snapshotKeys are the keys `ctr snapshots ls` lists for windowsfilter.
func snapshotKeys(t *testing.T, n *Node, ns string) []string {
	t.Helper()
	var keys []string
	for _, line := range strings.Split(ctr(t, n, "-n", ns, "snapshots", "--snapshotter", "windowsfilter", "ls"), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			keys = append(keys, f[0])
		}
	}
	return keys
}

// snapshotDirs are the directories in the snapshotter's root.
func snapshotDirs(t *testing.T, n *Node) []string {
	t.Helper()
	entries, err := os.ReadDir(n.Path(SnapshotterRoot + `\snapshots`))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// The snapshotter serves containerd.exe as its proxy plugins, over named
// pipes: both plugins load, snapshots are created, listed, mounted and
// removed, a view gets a scratch as in containerd's windows snapshotter
// (defect 8), and an import, which needs BackupWrite, fails with an error
// that says so and leaves no snapshot behind.
func TestSnapshotterServesContainerd(t *testing.T) {
	n := startNode(t)

	plugins := ctr(t, n, "plugins", "ls")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`io\.containerd\.snapshotter\.v1\s+windowsfilter\s+windows/amd64\s+ok`),
		regexp.MustCompile(`io\.containerd\.differ\.v1\s+windowsfilter-diff\s+windows/amd64\s+ok`),
	} {
		if !want.MatchString(plugins) {
			t.Errorf("plugins ls has no %s:\n%s", want, plugins)
		}
	}

	// The first call that reaches the snapshotter: containerd's first
	// connection to its pipe must not be lost (Wine's placeholder pipe
	// instance, see snapshotter/service).
	ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "prepare", "base", "")
	mounts := ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "mounts", `C:\mnt`, "base")
	if !strings.Contains(mounts, "-t windows-layer "+SnapshotterRoot+`\snapshots\`) {
		t.Errorf("mounts of a base layer: %q", mounts)
	}

	// A committed layer (as an unpack commits it) and a view of it: the
	// view's scratch is the base layer's blank.vhdx, copied.
	l := seedLayer(t, n, "default", "layer", "")
	ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "view", "v", l.key)
	mounts = ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "mounts", `C:\mnt`, "v")
	m := regexp.MustCompile(`-t windows-layer (\S+) .*parentLayerPaths=\["([^"]+)"\]`).FindStringSubmatch(strings.ReplaceAll(mounts, `\\`, `\`))
	if m == nil || m[2] != l.dir {
		t.Fatalf("mounts of the view: %q, want its parent %s", mounts, l.dir)
	}
	if b, err := os.ReadFile(filepath.Join(n.Path(m[1]), "sandbox.vhdx")); err != nil || string(b) != blankVHDX {
		t.Errorf("the view's sandbox.vhdx: %q, %v", b, err)
	}

	// A base layer written in place and committed is converted by
	// hcsshim, whose registry hives come from offreg.dll, which Wine lacks:
	// the commit fails and says so, and the snapshotter serves on (it
	// ended at the DLL's panic before).
	ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "prepare", "in-place", "")
	out, err := n.Ctr("snapshots", "--snapshotter", "windowsfilter", "commit", "in-place-committed", "in-place")
	if err == nil || !strings.Contains(out, "convert to a base layer (offreg.dll writes its registry hives): this Windows lacks a DLL it needs") {
		t.Errorf("commit of a base layer without offreg.dll: %v\n%s", err, out)
	}
	for _, key := range []string{"v", "base", "in-place"} {
		ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "rm", key)
	}
	if keys := snapshotKeys(t, n, "default"); !slices.Equal(keys, []string{l.key}) {
		t.Errorf("snapshots after rm: %q, want only %s", keys, l.key)
	}
	// Wine has no layer driver (this node has no stand-ins): the removed
	// snapshots stay as rm- directories, for the snapshotter's sweep, and
	// the service says so (its log arrives through Wine's console, a
	// moment later).
	n.waitLog(&n.snapshotterLog, "removed snapshot's directory is destroyed by the sweep once released", 1)

	archive := imageArchive(t, "example.com/app:1", HostBuild+".1")
	out, err = n.Ctr("images", "import", "--snapshotter", "windowsfilter", WindowsPath(archive))
	if err == nil {
		t.Fatalf("import unpacked without BackupWrite:\n%s", out)
	}
	if !regexp.MustCompile(`import layer sha256:\w+ into .*: BackupWrite .*: Request not supported`).MatchString(out) {
		t.Errorf("import's error does not name the layer and BackupWrite:\n%s", out)
	}
	if keys := snapshotKeys(t, n, "default"); !slices.Equal(keys, []string{l.key}) {
		t.Errorf("snapshots after the failed import: %q", keys)
	}
}

// containerd.exe runs a task through the shim as on a Windows node: it
// launches containerd-shim-winproc-v2.exe (start, with the bootstrap
// protocol of containerd 2.3+), connects to the pipe the shim names, and
// sends Create. The shim reads the container's image from containerd over
// gRPC on its named pipe (defect 1: grpc had no resolver for npipe://),
// accepts the image, and fails at the compute service with the fix in the
// message. When the shim has gone, containerd runs its delete, which cleans
// up.
func TestTaskCreateThroughContainerd(t *testing.T) {
	n := startNode(t)
	const ref = "example.com/app:1"
	img := importImage(t, n, "default", ref, HostBuild+".1")

	out, err := n.Ctr("run", "--snapshotter", "windowsfilter", "--runtime", "io.containerd.winproc.v2", ref, "c1")
	if err == nil {
		t.Fatalf("a task ran without HCS:\n%s", out)
	}
	for _, want := range []string{"create compute system for task c1", serviceMissing, "Install-WindowsFeature -Name Containers"} {
		if !strings.Contains(out, want) {
			t.Errorf("ctr run's error has no %q:\n%s", want, out)
		}
	}
	log := n.ContainerdLog()
	if !regexp.MustCompile(`msg="connecting to shim c1" address="\\\\\\\\.\\\\pipe\\\\ProtectedPrefix\\\\Administrators\\\\winproc-shim-[0-9a-f]+" namespace=default protocol=ttrpc version=3`).MatchString(log) {
		t.Errorf("containerd did not connect to the shim's pipe from its bootstrap result")
	}
	waitLog(t, n, `msg="cleaning up dead shim" id=c1`)
	if strings.Contains(n.ContainerdLog(), "failed to delete dead shim") {
		t.Errorf("the shim's delete failed")
	}

	// An image the host cannot run is refused by the shim's check, which
	// read its config from containerd.
	const old = "example.com/app:ltsc2019"
	importImage(t, n, "default", old, "10.0.17763.1")
	out, err = n.Ctr("run", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", "--runtime", "io.containerd.winproc.v2", old, "c2")
	want := `image "` + old + `" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022)`
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("ctr run of an ltsc2019 image: %v\n%s\nwant %q", err, out, want)
	}

	// Removing the containers removes their scratches (rm- directories
	// are left for a later cleanup: Wine has no layer driver): only the
	// layers are left, which the two images share.
	ctr(t, n, "containers", "rm", "c1", "c2")
	var layers []string
	for _, c := range img {
		layers = append(layers, c.String())
	}
	if keys := snapshotKeys(t, n, "default"); !slices.Equal(slices.Sorted(slices.Values(keys)), slices.Sorted(slices.Values(layers))) {
		t.Errorf("snapshots left: %q, want the layers %q", keys, layers)
	}
	if pids := n.ShimPIDs(); len(pids) != 0 {
		t.Errorf("shims still running: %v", pids)
	}
}

// The shim's own protocol, as containerd drives it, step by step: `start`
// prints the pipe it serves on and leaves the serving shim running, whose
// standard error is the bundle's panic.log; the task API answers Connect on
// that pipe; Create connects the stdio named pipes containerd serves
// before it asks for the compute system, and closes them when that fails;
// after the shim is killed, `delete` cleans up and answers containerd's
// DeleteResponse.
func TestShimStartConnectKillDelete(t *testing.T) {
	n := startNode(t)
	const ref = "example.com/app:1"
	importImage(t, n, "default", ref, HostBuild+".1")
	ctr(t, n, "containers", "create", "--snapshotter", "windowsfilter", "--runtime", "io.containerd.winproc.v2", ref, "t1")
	bundle := n.Path(`C:\bundles\t1`)
	if err := os.MkdirAll(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := map[string]any{
		"ociVersion": "1.1.0",
		"process":    map[string]any{"args": []string{`C:\app.exe`}, "cwd": `C:\`},
		"root":       map[string]any{},
		"windows":    map[string]any{"layerFolders": layerFolders(t, n, "t1")},
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	shim := InstallDir + `\containerd-shim-winproc-v2.exe`
	flags := []string{"-namespace", "default", "-id", "t1", "-address", `\\.\pipe\containerd-containerd`}
	// containerd before 2.3 starts a shim so: the environment, and the
	// address printed. GODEBUG=inittrace=1 makes every Go process write to
	// its standard error at once, so panic.log shows where the serving
	// shim's goes.
	env := []string{
		"NAMESPACE=default",
		`GRPC_ADDRESS=\\.\pipe\containerd-containerd`,
		`TTRPC_ADDRESS=\\.\pipe\containerd-containerd.ttrpc`,
		"GODEBUG=inittrace=1",
	}
	out, stderr, err := n.Exec(bundle, env, shim, append(flags, "start")...)
	if err != nil {
		t.Fatalf("shim start: %v\n%s%s", err, out, stderr)
	}
	address := regexp.MustCompile(`(?m)^\\\\\.\\pipe\\ProtectedPrefix\\Administrators\\winproc-shim-[0-9a-f]+$`).FindString(out)
	if address == "" {
		t.Fatalf("shim start printed no pipe address:\n%s", out)
	}
	pids := n.ShimPIDs()
	if len(pids) != 1 {
		t.Fatalf("serving shims: %v, want one", pids)
	}

	connected, err := n.Run(InstallDir+`\shimclient.exe`, "connect", address, "default", "t1")
	if err != nil || !regexp.MustCompile(`shim_pid=[1-9]\d* task_pid=0`).MatchString(connected) {
		t.Fatalf("Connect: %v\n%s", err, connected)
	}
	created, err := n.Run(InstallDir+`\shimclient.exe`, "create", address, "default", "t1", `C:\bundles\t1`)
	if err != nil || !strings.Contains(created, "create: ") || !strings.Contains(created, serviceMissing) {
		t.Errorf("Create: %v, want the compute service's error\n%s", err, created)
	}
	t.Logf("shimclient create:\n%s", created)
	for _, stream := range []string{"stdin", "stdout", "stderr"} {
		if !strings.Contains(created, stream+": connected, then closed by the shim") {
			t.Errorf("the shim did not connect, or did not close, the %s pipe:\n%s", stream, created)
		}
	}
	panicLog, err := os.ReadFile(filepath.Join(bundle, "panic.log"))
	if err != nil || !strings.Contains(string(panicLog), "init github.com/winproc/winproc/") {
		t.Errorf("panic.log does not hold the serving shim's standard error: %v\n%s", err, tail(string(panicLog), 5))
	}

	n.KillShims()
	out, stderr, err = n.Exec(bundle, nil, shim, append(flags, "-bundle", `C:\bundles\t1`, "delete")...)
	if err != nil {
		t.Fatalf("shim delete after a kill: %v\n%s%s", err, out, stderr)
	}
	var resp taskv3.DeleteResponse
	if err := proto.Unmarshal([]byte(out), &resp); err != nil || resp.ExitStatus != 255 || resp.ExitedAt == nil {
		t.Errorf("delete's answer: %v, %v (%q), want exit status 255 and a time", &resp, err, out)
	}
}

// `winproc doctor` on a node set up as install.ps1 sets it up, with the
// pause image imported and unpacked: every check runs against containerd.exe
// and passes.
func TestDoctor(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	img, err := winimage.PauseImage(ctx, winimage.PauseOptions{
		PauseExe:  filepath.Join(bins.Project, "pause.exe"),
		WincatExe: filepath.Join(bins.Project, "wincat.exe"),
		OSVersion: HostBuild + ".1",
	})
	if err != nil {
		t.Fatal(err)
	}
	importBuilt(t, n, "k8s.io", install.PauseImage, img)

	out, err := n.Run(InstallDir+`\winproc.exe`, "doctor")
	if err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	checks := []string{"config", "handler", "proxy plugins", "unpack", "shim", "containerd", "snapshotter", "plugins", "pause image", "state dirs", "hostprocess", "orphans", "terminations", "node shutdown"}
	for _, c := range checks {
		if !regexp.MustCompile(`(?m)^OK +` + c + ` `).MatchString(out) {
			t.Errorf("doctor did not pass the %s check:\n%s", c, out)
		}
	}
	if want := fmt.Sprintf("%d checks: 0 failed, 0 warnings", len(checks)); !strings.Contains(out, want) {
		t.Errorf("doctor's summary is not %q:\n%s", want, out)
	}
}

// serviceMissing is how the shim says Wine has no compute service.
const serviceMissing = "Host Compute Service is not installed"

// layerFolders are the layer folders of snapshot key for a spec: its
// parent layers, then the snapshot itself, the scratch.
func layerFolders(t *testing.T, n *Node, key string) []string {
	t.Helper()
	out := ctr(t, n, "snapshots", "--snapshotter", "windowsfilter", "mounts", `C:\mnt`, key)
	m := regexp.MustCompile(`-t windows-layer (\S+) \S+ -o \S*parentLayerPaths=(\[[^\]]*\])`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("mounts of %s: %q", key, out)
	}
	var parents []string
	if err := json.Unmarshal([]byte(m[2]), &parents); err != nil {
		t.Fatalf("parentLayerPaths of %s: %v", key, err)
	}
	return append(parents, m[1])
}

func waitLog(t *testing.T, n *Node, pattern string) {
	t.Helper()
	n.waitLog(&n.containerdLog, pattern, 1)
}

// blankVHDX stands in for the base layer's blank.vhdx, which a real
// import of a base layer makes.
const blankVHDX = "blank.vhdx of the base layer"

// layer is a committed layer snapshot.
type layer struct {
	key string // its name in containerd
	dir string // its directory, as a Windows path
}

// seedLayer commits the layer snapshot name on parent as containerd's
// unpack would, and gives it what importing a Windows layer writes (Files\,
// and blank.vhdx for a base layer): Wine has no BackupWrite, so the differ
// cannot import layers here.
func seedLayer(t *testing.T, n *Node, ns, name, parent string) layer {
	t.Helper()
	before := snapshotDirs(t, n)
	extract := "extract-seed " + name
	ctr(t, n, "-n", ns, "snapshots", "--snapshotter", "windowsfilter", "prepare", extract, parent)
	ctr(t, n, "-n", ns, "snapshots", "--snapshotter", "windowsfilter", "commit", name, extract)
	var id string
	for _, d := range snapshotDirs(t, n) {
		if !slices.Contains(before, d) {
			id = d
		}
	}
	if id == "" {
		t.Fatalf("no snapshot directory for %s", name)
	}
	dir := SnapshotterRoot + `\snapshots\` + id
	if err := os.MkdirAll(filepath.Join(n.Path(dir), "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if parent == "" {
		if err := os.WriteFile(filepath.Join(n.Path(dir), "blank.vhdx"), []byte(blankVHDX), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return layer{key: name, dir: dir}
}

// imageArchive builds an image of the synthetic base layer and one small
// layer for osVersion, and returns the archive's path.
func imageArchive(t *testing.T, ref, osVersion string) string {
	t.Helper()
	img := buildImage(t, osVersion)
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := winimage.Write(context.Background(), out, winimage.FormatOCIArchive, ref, img); err != nil {
		t.Fatal(err)
	}
	return out
}

func buildImage(t *testing.T, osVersion string) v1.Image {
	t.Helper()
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "app.txt"), []byte("app"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := winimage.BuildTrees(context.Background(), winimage.TreesOptions{
		Config:     winimage.Config{Entrypoint: []string{`C:\app.exe`}},
		Trees:      []string{tree},
		OSVersions: []string{osVersion},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a.(v1.Image)
}

// importImage imports an image of buildImage as ref into namespace ns,
// with its layers in place (seedLayer), and returns their chain IDs.
func importImage(t *testing.T, n *Node, ns, ref, osVersion string) []digest.Digest {
	t.Helper()
	return importBuilt(t, n, ns, ref, buildImage(t, osVersion))
}

// importBuilt imports img as ref into namespace ns without unpacking it,
// then puts its layers in place as unpacked layers; it returns their chain
// IDs.
func importBuilt(t *testing.T, n *Node, ns, ref string, img v1.Image) []digest.Digest {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := winimage.Write(context.Background(), out, winimage.FormatOCIArchive, ref, img); err != nil {
		t.Fatal(err)
	}
	ctr(t, n, "-n", ns, "images", "import", "--all-platforms", "--no-unpack", WindowsPath(out))
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	diffIDs := make([]digest.Digest, len(cfg.RootFS.DiffIDs))
	for i, d := range cfg.RootFS.DiffIDs {
		diffIDs[i] = digest.Digest(d.String())
	}
	chain := identity.ChainIDs(diffIDs)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	parent := ""
	for i, c := range chain {
		if !slices.Contains(snapshotKeys(t, n, ns), c.String()) {
			l := seedLayer(t, n, ns, c.String(), parent)
			extractFiles(t, layers[i], n.Path(l.dir))
		}
		parent = c.String()
	}
	return chain
}

// extractFiles writes the regular files and directories under Files/ of
// a Windows layer into dir, as importing it would.
func extractFiles(t *testing.T, layer v1.Layer, dir string) {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.ReplaceAll(h.Name, `\`, "/")
		if !strings.HasPrefix(name, "Files/") || strings.Contains(name, "..") {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				var b []byte
				if b, err = io.ReadAll(tr); err == nil {
					err = os.WriteFile(p, b, 0o755)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
