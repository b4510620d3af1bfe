//go:build linux

package winenode

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"

	"github.com/winproc/winproc/integration/winenode/critestimage"
	"github.com/winproc/winproc/winimage"
)

// The registries critest's image names are on (cri-tools v1.36.0
// pkg/validate/consts.go, pkg/framework/util.go), and the one of the
// conformance image, all mirrored to one registry on the loopback through
// containerd's hosts.toml: critest's -registry-prefix keeps only an image's
// path and drops its tag or digest (framework.PrepareImageName).
var critestRegistries = []string{"gcr.io", "registry.k8s.io", "k8s.gcr.io", conformanceRegistry}

const (
	conformanceRegistry = "conformance.winproc.test"
	// conformanceImage runs critest's default command and scripts: the
	// image's powershell.exe (a native host of its script engine) and
	// ping.exe (critestimage).
	conformanceImage = conformanceRegistry + "/critest-default:1"
	// webServerImage serves HTTP on port 80, as the nginx image critest
	// names does: the test app.
	webServerImage = conformanceRegistry + "/critest-webserver:1"
)

// critestImages are the images critest pulls by name, by their path on
// the mirror: which test image each is (images of one content share an
// ID, as critest's tags-of-one-image specs need).
var critestImages = map[string]string{
	"k8s-staging-cri-tools/win-test-image-latest:latest": "latest",
	"k8s-staging-cri-tools/win-test-image-tag:test":      "tag",
	"k8s-staging-cri-tools/win-test-image-tag:all":       "all",
	"k8s-staging-cri-tools/win-test-image-1:latest":      "1",
	"k8s-staging-cri-tools/win-test-image-2:latest":      "2",
	"k8s-staging-cri-tools/win-test-image-3:latest":      "3",
	"k8s-staging-cri-tools/win-test-image-tags:1":        "tags",
	"k8s-staging-cri-tools/win-test-image-tags:2":        "tags",
	"k8s-staging-cri-tools/win-test-image-tags:3":        "tags",
	"pause:3.9": "pause",
}

// startConformanceRegistry serves every image critest pulls on the
// loopback (go-containerregistry's registry) and returns its host:port and
// the images.
func startConformanceRegistry(t *testing.T) (string, []v1.Image) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	programs := buildConformancePrograms(t)
	var images []v1.Image
	push := func(path string, img v1.Image) {
		if err := pushImage(srv.URL, path, img); err != nil {
			t.Fatalf("push %s: %v", path, err)
		}
		images = append(images, img)
	}
	contents := map[string]v1.Image{}
	for path, content := range critestImages {
		if contents[content] == nil {
			contents[content] = testImage(t, content, programs)
		}
		push(path, contents[content])
	}
	conformance := map[string][]byte{}
	for _, p := range critestimage.Programs {
		conformance[p] = programs[p]
	}
	push(strings.TrimPrefix(conformanceImage, conformanceRegistry+"/"), treeImage(t, conformance, nil, []string{"cmd.exe"}))
	push(strings.TrimPrefix(webServerImage, conformanceRegistry+"/"), treeImage(t, map[string][]byte{
		"winproc-testapp.exe": programs["winproc-testapp.exe"],
	}, []string{`C:\winproc-testapp.exe`, "serve", "-addr", "0.0.0.0:80"}, nil))
	return host, images
}

// seedImageLayers gives the node the layer snapshots of images, as
// importing them would (seedLayer: Wine has no BackupWrite, so the differ
// cannot import a layer here), each a garbage collection root: a pull then
// finds every layer unpacked and skips its import, as containerd's
// unpacker does for a snapshot that exists, and a removed image's layers
// stay for the next pull of it.
func seedImageLayers(t *testing.T, n *Node, images []v1.Image) {
	t.Helper()
	for _, img := range images {
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		diffIDs := make([]digest.Digest, len(cfg.RootFS.DiffIDs))
		for i, d := range cfg.RootFS.DiffIDs {
			diffIDs[i] = digest.Digest(d.String())
		}
		parent := ""
		for i, c := range identity.ChainIDs(diffIDs) {
			if !slices.Contains(snapshotKeys(t, n, "k8s.io"), c.String()) {
				l := seedLayer(t, n, "k8s.io", c.String(), parent)
				extractFiles(t, layers[i], n.Path(l.dir))
				ctr(t, n, "-n", "k8s.io", "snapshots", "--snapshotter", "windowsfilter", "label", c.String(), "containerd.io/gc.root=conformance")
			}
			parent = c.String()
		}
	}
}

// pushImage pushes img as repo:tag (path) to the registry at url through
// the distribution API: each blob in one monolithic upload, then the
// manifest.
func pushImage(url, path string, img v1.Image) error {
	repo, tag, _ := strings.Cut(path, ":")
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	blobs := [][]byte{cfg}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		blobs = append(blobs, b)
	}
	for _, b := range blobs {
		d := digest.FromBytes(b)
		if err := send(http.MethodPost, fmt.Sprintf("%s/v2/%s/blobs/uploads/?digest=%s", url, repo, d), "application/octet-stream", b); err != nil {
			return err
		}
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	return send(http.MethodPut, fmt.Sprintf("%s/v2/%s/manifests/%s", url, repo, tag), string(mt), manifest)
}

func send(method, url, contentType string, body []byte) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, msg)
	}
	return nil
}

// testImage is one of critest's test images. cri-tools'
// images/image-test-win adds a file to nanoserver, whose command is
// cmd.exe (the node's, here: the image has no Windows folder); the
// pause image (registry.k8s.io/pause) runs pause.exe.
func testImage(t *testing.T, content string, programs map[string][]byte) v1.Image {
	t.Helper()
	if content == "pause" {
		return treeImage(t, map[string][]byte{"pause.exe": programs["pause.exe"]}, []string{`C:\pause.exe`}, nil)
	}
	return treeImage(t, map[string][]byte{content: []byte(content + "\n")}, nil, []string{"cmd.exe"})
}

// buildConformancePrograms builds the conformance image's programs
// (critestimage) and reads them with the project's test app and pause.exe.
func buildConformancePrograms(t *testing.T) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	if err := critestimage.Build(context.Background(), "critestimage", dir); err != nil {
		t.Fatal(err)
	}
	paths := []string{filepath.Join(bins.Project, "winproc-testapp.exe"), filepath.Join(bins.Project, "pause.exe")}
	for _, p := range critestimage.Programs {
		paths = append(paths, filepath.Join(dir, p))
	}
	programs := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		programs[filepath.Base(p)] = b
	}
	return programs
}

// treeImage is an image for the node's build of one layer holding files.
func treeImage(t *testing.T, files map[string][]byte, entrypoint, cmd []string) v1.Image {
	t.Helper()
	tree := t.TempDir()
	for f, b := range files {
		if err := os.WriteFile(filepath.Join(tree, f), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	layer, err := winimage.LayerFromTree(context.Background(), tree)
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Build(winimage.Config{OSVersion: HostBuild + ".1", Entrypoint: entrypoint, Cmd: cmd}, layer)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// mirrorRegistries has the node's containerd pull critest's registries
// from the one at host (hosts.toml in the CRI's registry config_path).
func mirrorRegistries(t *testing.T, n *Node, host string) {
	t.Helper()
	for _, r := range critestRegistries {
		dir := n.Path(certsDir + `\` + r)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", host, host)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// certsDir is the CRI's registry config_path on the conformance node.
const certsDir = `C:\ProgramData\containerd\certs.d`
