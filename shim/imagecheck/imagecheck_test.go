package imagecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/errdefs"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/winbuild"
)

type containerRecords map[string]containers.Container

func (r containerRecords) Get(_ context.Context, id string) (containers.Container, error) {
	if c, ok := r[id]; ok {
		return c, nil
	}
	return containers.Container{}, errdefs.ErrNotFound
}

func (r containerRecords) List(context.Context, ...string) ([]containers.Container, error) {
	panic("unused")
}
func (r containerRecords) Create(context.Context, containers.Container) (containers.Container, error) {
	panic("unused")
}
func (r containerRecords) Update(context.Context, containers.Container, ...string) (containers.Container, error) {
	panic("unused")
}
func (r containerRecords) Delete(context.Context, string) error { panic("unused") }

type imageRecords map[string]images.Image

func (r imageRecords) Get(_ context.Context, name string) (images.Image, error) {
	if i, ok := r[name]; ok {
		return i, nil
	}
	return images.Image{}, errdefs.ErrNotFound
}
func (r imageRecords) List(context.Context, ...string) ([]images.Image, error) { panic("unused") }
func (r imageRecords) Create(context.Context, images.Image) (images.Image, error) {
	panic("unused")
}
func (r imageRecords) Update(context.Context, images.Image, ...string) (images.Image, error) {
	panic("unused")
}
func (r imageRecords) Delete(context.Context, string, ...images.DeleteOpt) error { panic("unused") }

func write(t *testing.T, store content.Store, mediaType string, v any) ocispec.Descriptor {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(context.Background(), store, desc.Digest.String(), bytes.NewReader(b), desc); err != nil {
		t.Fatal(err)
	}
	return desc
}

func manifest(t *testing.T, store content.Store, osVersion string) ocispec.Descriptor {
	cfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}})
	m := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: cfg})
	m.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}
	return m
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := winbuild.Version{Major: 10, Build: 20348, Revision: 1}
	index := write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{
		manifest(t, store, "10.0.17763.1"), manifest(t, store, "10.0.20348.5"),
	}})
	s := Stores{
		Content: store,
		Images: imageRecords{
			"app:multi":   {Name: "app:multi", Target: index},
			"app:2019":    {Name: "app:2019", Target: manifest(t, store, "10.0.17763.5820")},
			"app:2022":    {Name: "app:2022", Target: manifest(t, store, "10.0.20348.2227")},
			"app:unknown": {Name: "app:unknown", Target: manifest(t, store, "")},
			"app:onlyold": {Name: "app:onlyold", Target: write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{manifest(t, store, "10.0.17763.2")}})},
		},
		Containers: containerRecords{
			"multi": {ID: "multi", Image: "app:multi"}, "old": {ID: "old", Image: "app:2019"},
			"new": {ID: "new", Image: "app:2022"}, "unknown": {ID: "unknown", Image: "app:unknown"},
			"rootfs-only": {ID: "rootfs-only"}, "gone": {ID: "gone", Image: "app:deleted"},
			"onlyold": {ID: "onlyold", Image: "app:onlyold"},
		},
	}
	tests := []struct {
		id      string
		wantErr func(error) bool
		wantMsg string
	}{
		{id: "new"},
		{id: "multi"},
		{id: "unknown"},
		{id: "rootfs-only"},
		{id: "gone"},
		{id: "old", wantErr: errdefs.IsFailedPrecondition, wantMsg: `image "app:2019" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`},
		{id: "onlyold", wantErr: errdefs.IsNotFound},
		{id: "missing", wantErr: errdefs.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			err := Check(ctx, s, host, tc.id)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !tc.wantErr(err) {
				t.Fatalf("Check: %v", err)
			}
			var mismatch *winbuild.MismatchError
			if tc.wantMsg != "" && (!errors.As(err, &mismatch) || err.Error() != tc.wantMsg) {
				t.Errorf("message %q, want %q", err, tc.wantMsg)
			}
		})
	}
}
