package imagecheck

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/internal/contenttest"
	"github.com/winproc/winproc/winbuild"
)

// records are containerd's records at the seam: container → image name,
// image name → target.
type records struct {
	containers map[string]string
	images     map[string]ocispec.Descriptor
}

func (r records) ContainerImage(_ context.Context, id string) (string, error) {
	ref, ok := r.containers[id]
	if !ok {
		return "", errdefs.ErrNotFound
	}
	return ref, nil
}

func (r records) ImageTarget(_ context.Context, name string) (ocispec.Descriptor, error) {
	d, ok := r.images[name]
	if !ok {
		return ocispec.Descriptor{}, errdefs.ErrNotFound
	}
	return d, nil
}

// write writes a value as JSON to the content store.
var write = contenttest.JSON

func manifest(t *testing.T, store content.Store, osVersion string) ocispec.Descriptor {
	cfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}})
	m := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: cfg})
	m.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}
	return m
}

// warnings records the warnings logged with one context.
type warnings struct {
	ctx  context.Context
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Levels() []log.Level { return []log.Level{log.WarnLevel} }

func (w *warnings) Fire(e *log.Entry) error {
	if e.Context == w.ctx {
		w.mu.Lock()
		w.msgs = append(w.msgs, e.Message)
		w.mu.Unlock()
	}
	return nil
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	msgs := w.msgs
	w.msgs = nil
	return msgs
}

func TestCheck(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, t.Name())
	// The logger is the process's; the hook keeps what this context logs.
	logged := &warnings{ctx: ctx}
	log.L.Logger.AddHook(logged)
	store, err := local.NewStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	host := winbuild.Version{Major: 10, Build: 20348, Revision: 1}
	// An index whose entry says the build its config does not.
	noBuildCfg := write(t, store, ocispec.MediaTypeImageConfig, ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64"}})
	indexOnly := write(t, store, ocispec.MediaTypeImageManifest, ocispec.Manifest{Config: noBuildCfg})
	indexOnly.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.7"}
	index := write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{
		manifest(t, store, "10.0.17763.1"), manifest(t, store, "10.0.20348.5"),
	}})
	s := Stores{
		Content: store,
		Records: records{
			images: map[string]ocispec.Descriptor{
				"app:multi":     index,
				"app:2019":      manifest(t, store, "10.0.17763.5820"),
				"app:2022":      manifest(t, store, "10.0.20348.2227"),
				"app:unknown":   manifest(t, store, ""),
				"app:indexonly": write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{indexOnly}}),
				"app:onlyold":   write(t, store, ocispec.MediaTypeImageIndex, ocispec.Index{Manifests: []ocispec.Descriptor{manifest(t, store, "10.0.17763.2")}}),
			},
			containers: map[string]string{
				"multi": "app:multi", "old": "app:2019", "new": "app:2022", "unknown": "app:unknown",
				"rootfs-only": "", "gone": "app:deleted", "onlyold": "app:onlyold",
				"indexonly": "app:indexonly",
			},
		},
	}
	tests := []struct {
		id      string
		wantErr func(error) bool
		wantMsg string
		// warn is the warning logged, "" for none.
		warn string
	}{
		{id: "new"},
		{id: "multi"},
		{id: "unknown", warn: `image "app:unknown" does not declare an os.version`},
		// The index's os.version stands in for the config's.
		{id: "indexonly"},
		{id: "rootfs-only"},
		{id: "gone", warn: "the container's image is gone; skipping the Windows build check"},
		{id: "old", wantErr: errdefs.IsFailedPrecondition, wantMsg: `image "app:2019" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`},
		{id: "onlyold", wantErr: errdefs.IsNotFound},
		{id: "missing", wantErr: errdefs.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			err := Check(ctx, s, host, tc.id)
			got := logged.take()
			if (tc.warn == "" && len(got) > 0) || (tc.warn != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.warn))) {
				t.Errorf("warnings %q, want %q", got, tc.warn)
			}
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
