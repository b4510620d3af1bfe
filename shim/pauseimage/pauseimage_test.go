package pauseimage

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/internal/contenttest"
	"github.com/winproc/winproc/winbuild"
)

type records map[string]ocispec.Descriptor

func (r records) ImageTarget(_ context.Context, name string) (ocispec.Descriptor, error) {
	d, ok := r[name]
	if !ok {
		return ocispec.Descriptor{}, errdefs.ErrNotFound
	}
	return d, nil
}

// write writes a value as JSON to the content store.
var write = contenttest.JSON

var diffIDs = []digest.Digest{digest.FromString("base"), digest.FromString("pause")}

// image writes a manifest and config of os/amd64 declaring osVersion.
func image(t *testing.T, store content.Store, os, osVersion string) ocispec.Descriptor {
	t.Helper()
	cfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{
		Platform: ocispec.Platform{OS: os, Architecture: "amd64", OSVersion: osVersion},
		Config:   ocispec.ImageConfig{Entrypoint: []string{`C:\pause.exe`}, Env: []string{`PATH=C:\Windows`}},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	})
	m := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: cfg})
	m.Platform = &ocispec.Platform{OS: os, Architecture: "amd64", OSVersion: osVersion}
	return m
}

func TestLookup(t *testing.T) {
	ctx := context.Background()
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := winbuild.Version{Major: 10, Build: 20348, Revision: 1}
	ltsc2022 := image(t, store, "windows", "10.0.20348.2227")
	missingManifest := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("gone"), Size: 4}
	// An index whose best entry says its build only in the index.
	unknownCfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{
		Platform: ocispec.Platform{OS: "windows", Architecture: "amd64"},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	})
	indexOnly := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: unknownCfg})
	indexOnly.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.7"}
	recs := records{
		"pause:2022": ltsc2022,
		"pause:multi": write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{
			image(t, store, "linux", ""), image(t, store, "windows", "10.0.17763.1"), ltsc2022,
		}}),
		"pause:2019":      image(t, store, "windows", "10.0.17763.5820"),
		"pause:unknown":   image(t, store, "windows", ""),
		"pause:linux":     image(t, store, "linux", ""),
		"pause:gone":      missingManifest,
		"pause:indexonly": write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{indexOnly}}),
		"pause:onlylinux": write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{
			{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("l"), Size: 1, Platform: &ocispec.Platform{OS: "linux", Architecture: "amd64"}},
		}}),
	}
	tests := []struct {
		image     string
		manifest  digest.Digest
		osVersion string
		is        func(error) bool
		msg       string
	}{
		{image: "pause:2022", manifest: ltsc2022.Digest, osVersion: "10.0.20348.2227"},
		{image: "pause:multi", manifest: ltsc2022.Digest, osVersion: "10.0.20348.2227"},
		{image: "pause:unknown", osVersion: ""},
		{image: "pause:indexonly", manifest: indexOnly.Digest, osVersion: "10.0.20348.7"},
		{image: "pause:2019", is: errdefs.IsFailedPrecondition,
			msg: `image "pause:2019" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`},
		{image: "pause:linux", is: errdefs.IsFailedPrecondition,
			msg: `pause image "pause:linux" is a linux/amd64 image; a Windows pod needs a Windows pause image (set pause_image in the runtime handler's options): failed precondition`},
		{image: "pause:missing", is: errdefs.IsNotFound,
			msg: `pause image "pause:missing" is not in containerd (namespace k8s.io): pull it (crictl pull pause:missing) or import it (ctr -n k8s.io images import --platform windows/amd64 ARCHIVE), or set pause_image in the runtime handler's options to an image the node has: not found`},
		{image: "pause:gone", is: errdefs.IsNotFound,
			msg: `pause image "pause:gone": its manifest ` + missingManifest.Digest.String() + ` is not in containerd's content store (namespace k8s.io): pull the image again for windows/amd64 (crictl pull pause:gone): not found`},
		{image: "pause:onlylinux", is: errdefs.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			got, err := lookup(ctx, recs.ImageTarget, store, "k8s.io", tc.image, host)
			if tc.is != nil {
				if !tc.is(err) {
					t.Fatalf("lookup = %v", err)
				}
				if tc.msg != "" && err.Error() != tc.msg {
					t.Errorf("message\n%s\nwant\n%s", err, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("lookup: %v", err)
			}
			if tc.manifest != "" && got.Desc.Digest != tc.manifest {
				t.Errorf("manifest %s, want %s", got.Desc.Digest, tc.manifest)
			}
			if got.OSVersion != tc.osVersion {
				t.Errorf("os.version %q, want %q", got.OSVersion, tc.osVersion)
			}
			if want := identity.ChainID(diffIDs); got.chainID != want {
				t.Errorf("chain ID %s, want %s", got.chainID, want)
			}
		})
	}

	var mismatch *winbuild.MismatchError
	if _, err := lookup(ctx, recs.ImageTarget, store, "k8s.io", "pause:2019", host); !errors.As(err, &mismatch) {
		t.Errorf("an ltsc2019 image's error is not winbuild's: %v", err)
	}
	if _, err := lookup(ctx, recs.ImageTarget, store, "k8s.io", "pause:onlylinux", host); err == nil || !strings.HasPrefix(err.Error(), `pause image "pause:onlylinux": no manifest for windows/amd64`) {
		t.Errorf("index without a Windows manifest: %v", err)
	}
}

func TestKey(t *testing.T) {
	if got := Key("abc"); got != "winproc-sandbox-abc" {
		t.Errorf("Key = %q", got)
	}
}
