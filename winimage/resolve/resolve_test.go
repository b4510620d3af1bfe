package resolve

import (
	"context"
	"errors"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/internal/contenttest"
	"github.com/winproc/winproc/winbuild"
)

// writeBlob and write write a blob, and a value as JSON, to the content
// store.
var writeBlob, write = contenttest.Blob, contenttest.JSON

// manifest writes a windows/amd64 manifest whose config declares
// configVersion; its descriptor's platform says indexVersion, as an index
// entry would.
func manifest(t *testing.T, store content.Store, configVersion, indexVersion string) ocispec.Descriptor {
	t.Helper()
	cfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: configVersion}})
	m := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: cfg})
	m.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: indexVersion}
	return m
}

func index(t *testing.T, store content.Store, entries ...ocispec.Descriptor) ocispec.Descriptor {
	t.Helper()
	return write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: entries})
}

func TestForHost(t *testing.T) {
	ctx := context.Background()
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := winbuild.Version{Major: 10, Build: 20348, Revision: 1}

	ltsc2022 := manifest(t, store, "10.0.20348.2227", "10.0.20348.2227")
	indexOnly := manifest(t, store, "", "10.0.20348.7")
	disagree := manifest(t, store, "10.0.20348.1", "10.0.20348.9")
	gone := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("gone"), Size: 4,
		Platform: &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1"}}
	noConfig := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromString("no config"), Size: 9}})
	garbled := writeBlob(t, store, ocispec.MediaTypeImageManifest, []byte("{not json"))

	tests := []struct {
		name      string
		target    ocispec.Descriptor
		manifest  digest.Digest
		osVersion string
		is        func(error) bool
		blob      string // the *BlobError's Blob, "" for none
	}{
		{name: "manifest", target: ltsc2022, manifest: ltsc2022.Digest, osVersion: "10.0.20348.2227"},
		{name: "best of an index", target: index(t, store, manifest(t, store, "10.0.17763.1", "10.0.17763.1"), ltsc2022, manifest(t, store, "10.0.20348.5", "10.0.20348.5")),
			manifest: ltsc2022.Digest, osVersion: "10.0.20348.2227"},
		{name: "the index's os.version for a config without", target: index(t, store, indexOnly), manifest: indexOnly.Digest, osVersion: "10.0.20348.7"},
		{name: "the config's os.version over the index's", target: index(t, store, disagree), manifest: disagree.Digest, osVersion: "10.0.20348.1"},
		// A manifest target has only its config to say its build.
		{name: "manifest without os.version", target: indexOnly, manifest: indexOnly.Digest, osVersion: ""},
		{name: "index without a manifest for the host", target: index(t, store, manifest(t, store, "10.0.17763.1", "10.0.17763.1")), is: errdefs.IsNotFound},
		{name: "neither index nor manifest", target: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip, Digest: digest.FromString("layer"), Size: 5}, is: errdefs.IsNotImplemented},
		{name: "index gone", target: ocispec.Descriptor{MediaType: ocispec.MediaTypeImageIndex, Digest: digest.FromString("gone index"), Size: 10}, is: errdefs.IsNotFound, blob: "index"},
		{name: "manifest gone", target: index(t, store, gone), is: errdefs.IsNotFound, blob: "manifest"},
		{name: "config gone", target: noConfig, is: errdefs.IsNotFound, blob: "config"},
		{name: "manifest not JSON", target: garbled, is: errdefs.IsInvalidArgument, blob: "manifest"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ForHost(ctx, store, tc.target, host)
			if tc.is != nil {
				if !tc.is(err) {
					t.Fatalf("ForHost = %v", err)
				}
				var blob *BlobError
				if errors.As(err, &blob) != (tc.blob != "") || tc.blob != "" && blob.Blob != tc.blob {
					t.Errorf("ForHost = %v, want a blob error for the %q", err, tc.blob)
				}
				return
			}
			if err != nil {
				t.Fatalf("ForHost: %v", err)
			}
			if got.Desc.Digest != tc.manifest {
				t.Errorf("manifest %s, want %s", got.Desc.Digest, tc.manifest)
			}
			if got.Manifest.Config.Digest == "" || got.Config.OS != "windows" {
				t.Errorf("manifest %+v, config %+v: not read", got.Manifest, got.Config)
			}
			if got.OSVersion != tc.osVersion {
				t.Errorf("os.version %q, want %q", got.OSVersion, tc.osVersion)
			}
		})
	}
}

func TestBlobErrorMessage(t *testing.T) {
	d := digest.FromString("m")
	err := &BlobError{Blob: "manifest", Desc: ocispec.Descriptor{Digest: d}, Err: errdefs.ErrNotFound}
	if want := "read its manifest " + d.String() + ": not found"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}
