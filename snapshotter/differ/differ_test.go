//go:build linux

// These tests drive the emulation importer and exporter; on Windows the
// differ calls HCS.

package differ

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/pkg/labels"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/errdefs"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/winproc/winproc/snapshotter"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/snapshotter/layertar"
	"github.com/winproc/winproc/winbuild"
)

var host = winbuild.Version{Major: 10, Minor: 0, Build: 20348, Revision: 1}

// imageRecords is the image store at the seam: names of image targets.
type imageRecords map[digest.Digest]string

func (r imageRecords) List(_ context.Context, filters ...string) ([]images.Image, error) {
	var out []images.Image
	for _, f := range filters {
		if name, ok := r[digest.Digest(strings.TrimPrefix(f, "target.digest=="))]; ok {
			out = append(out, images.Image{Name: name})
		}
	}
	return out, nil
}

// memoryLabels keeps content labels, which containerd keeps in its metadata
// store, in memory; concurrent unpacks update them at once.
type memoryLabels struct {
	mu sync.Mutex
	m  map[digest.Digest]map[string]string
}

func (m *memoryLabels) Get(d digest.Digest) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.m[d]), nil
}

func (m *memoryLabels) Set(d digest.Digest, l map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[d] = maps.Clone(l)
	return nil
}

func (m *memoryLabels) Update(d digest.Digest, update map[string]string) (map[string]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[d] == nil {
		m.m[d] = map[string]string{}
	}
	for k, v := range update {
		if v == "" {
			delete(m.m[d], k)
		} else {
			m.m[d][k] = v
		}
	}
	return maps.Clone(m.m[d]), nil
}

type fixture struct {
	ctx     context.Context
	store   content.Store
	sn      *snapshotter.Snapshotter
	differ  *Differ
	records imageRecords
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	store, err := local.NewLabeledStore(t.TempDir(), &memoryLabels{m: map[digest.Digest]map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sn, err := snapshotter.New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sn.Close() })
	records := imageRecords{}
	return &fixture{ctx: ctx, store: store, sn: sn, differ: New(store, records, host, sn.Root()), records: records}
}

func (f *fixture) write(t *testing.T, mediaType string, b []byte, lbls map[string]string) ocispec.Descriptor {
	t.Helper()
	desc := ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
	if err := content.WriteBlob(f.ctx, f.store, desc.Digest.String(), bytes.NewReader(b), desc, content.WithLabels(lbls)); err != nil {
		t.Fatal(err)
	}
	return desc
}

// layer builds a gzip Windows-format layer holding files and returns its
// descriptor and the digest of the uncompressed tar (its diff ID). opts
// make it a base layer (layertar.WithEmptyHives).
func (f *fixture) layer(t *testing.T, files map[string]string, opts ...layertar.ExportOption) (ocispec.Descriptor, digest.Digest) {
	t.Helper()
	tarball := f.tarball(t, files, opts...)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarball)
	zw.Close()
	return f.write(t, ocispec.MediaTypeImageLayerGzip, gz.Bytes(), nil), digest.FromBytes(tarball)
}

// tarball is the uncompressed Windows-format layer tar holding files.
func (f *fixture) tarball(t *testing.T, files map[string]string, opts ...layertar.ExportOption) []byte {
	t.Helper()
	src := t.TempDir()
	for name, body := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var tarball bytes.Buffer
	if err := layertar.FromTree(f.ctx, &tarball, src, opts...); err != nil {
		t.Fatal(err)
	}
	return tarball.Bytes()
}

// image records a manifest listing layer, with a config for osVersion, the
// way containerd's pull and import label them.
func (f *fixture) image(t *testing.T, name, osVersion string, layer ocispec.Descriptor) {
	t.Helper()
	f.records[f.manifest(t, osVersion, layer).Digest] = name
}

// indexedImage records an index whose one entry, for a manifest listing
// layer with a config for configVersion, names entryVersion.
func (f *fixture) indexedImage(t *testing.T, name, configVersion, entryVersion string, layer ocispec.Descriptor) {
	t.Helper()
	m := f.manifest(t, configVersion, layer)
	m.Platform = &ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: entryVersion}
	idx, _ := json.Marshal(ocispec.Index{Manifests: []ocispec.Descriptor{m}})
	f.records[f.write(t, ocispec.MediaTypeImageIndex, idx, map[string]string{gcManifestLabel + "0": m.Digest.String()}).Digest] = name
}

func (f *fixture) manifest(t *testing.T, osVersion string, layer ocispec.Descriptor) ocispec.Descriptor {
	t.Helper()
	cfg, _ := json.Marshal(ocispec.Image{Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: osVersion}})
	cfgDesc := f.write(t, ocispec.MediaTypeImageConfig, cfg, nil)
	m, _ := json.Marshal(ocispec.Manifest{Config: cfgDesc, Layers: []ocispec.Descriptor{layer}})
	return f.write(t, ocispec.MediaTypeImageManifest, m, map[string]string{
		gcConfigLabel:       cfgDesc.Digest.String(),
		gcLayerPrefix + "0": layer.Digest.String(),
	})
}

func (f *fixture) unpackMounts(t *testing.T, key string) []mount.Mount {
	t.Helper()
	mounts, err := f.sn.Prepare(f.ctx, "extract-"+key, "")
	if err != nil {
		t.Fatal(err)
	}
	return mounts
}

func TestApply(t *testing.T) {
	f := newFixture(t)
	desc, diffID := f.layer(t, map[string]string{"Windows/System32/hello.txt": "hello"})
	f.image(t, "example/app:1.0", "10.0.20348.1", desc)
	mounts := f.unpackMounts(t, "1")

	applied, err := f.differ.Apply(f.ctx, desc, mounts)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Digest != diffID || applied.MediaType != ocispec.MediaTypeImageLayer {
		t.Errorf("Apply = %+v, want the uncompressed layer %s", applied, diffID)
	}
	l, _ := layermount.Decode(mounts)
	b, err := os.ReadFile(filepath.Join(l.Path, "Files", "Windows", "System32", "hello.txt"))
	if err != nil || string(b) != "hello" {
		t.Errorf("imported file: %q, %v", b, err)
	}
}

// Apply takes a layer uncompressed or compressed with gzip or zstd, imports
// each the same, and reads a compressed stream to its end, so that the
// decompressor verifies its checksum.
func TestApplyCompressed(t *testing.T) {
	f := newFixture(t)
	tarball := f.tarball(t, map[string]string{"Windows/win.ini": "[fonts]", "a/b.txt": "b"})
	var gz, zs bytes.Buffer
	gw := gzip.NewWriter(&gz)
	gw.Write(tarball)
	gw.Close()
	zw, err := zstd.NewWriter(&zs)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(tarball)
	zw.Close()

	var plain []byte // the export of the uncompressed layer's import
	for _, tc := range []struct {
		name, mediaType string
		data            []byte
	}{
		{"plain", ocispec.MediaTypeImageLayer, tarball},
		{"gzip", ocispec.MediaTypeImageLayerGzip, gz.Bytes()},
		{"zstd", ocispec.MediaTypeImageLayerZstd, zs.Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mounts := f.unpackMounts(t, tc.name)
			applied, err := f.differ.Apply(f.ctx, f.write(t, tc.mediaType, tc.data, nil), mounts)
			if err != nil {
				t.Fatal(err)
			}
			if applied.Digest != digest.FromBytes(tarball) || applied.Size != int64(len(tarball)) {
				t.Errorf("Apply = %+v, want the uncompressed layer (%d bytes)", applied, len(tarball))
			}
			l, _ := layermount.Decode(mounts)
			var out bytes.Buffer
			if err := layertar.Export(f.ctx, &out, l.Path); err != nil {
				t.Fatal(err)
			}
			if plain == nil {
				plain = out.Bytes()
			} else if !bytes.Equal(out.Bytes(), plain) {
				t.Error("export differs from the uncompressed import")
			}
		})
	}
	// A corrupt gzip trailer is detected.
	bad := bytes.Clone(gz.Bytes())
	bad[len(bad)-6] ^= 0xff
	if _, err := f.differ.Apply(f.ctx, f.write(t, ocispec.MediaTypeImageLayerGzip, bad, nil), f.unpackMounts(t, "bad")); err == nil {
		t.Error("corrupt gzip accepted")
	}
}

func TestApplyBuildCheck(t *testing.T) {
	tests := []struct {
		name     string
		images   map[string]string // image name → os.version of images sharing the layer
		entry    string            // if set, each image is an index whose entry names this build
		base     bool              // the layer holds a Windows base (Hives/)
		wantErr  string
		refusing bool
	}{
		{name: "compatible", images: map[string]string{"example/app:1.0": "10.0.20348.2227"}},
		{name: "no image claims the layer", images: nil},
		{name: "no os.version", images: map[string]string{"example/old:1": ""}},
		{name: "one of two compatible", images: map[string]string{"example/a:2019": "10.0.17763.1", "example/a:2022": "10.0.20348.1"}},
		// No Windows base: only a HostProcess container can run it, on any
		// build; the shim refuses a process-isolated one at create.
		{name: "ltsc2019 HostProcess image on ltsc2022", images: map[string]string{"example/agent:1.0": "10.0.17763.5820"}},
		{
			name:     "ltsc2019 on ltsc2022",
			images:   map[string]string{"example/app:1.0": "10.0.17763.5820"},
			base:     true,
			refusing: true,
			wantErr:  `image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		// The build is winbuild.ImageOSVersion's, as the shim judges it.
		{
			name:     "ltsc2019 by its index entry on ltsc2022",
			images:   map[string]string{"example/app:1.0": ""},
			entry:    "10.0.17763.5820",
			base:     true,
			refusing: true,
			wantErr:  `image "example/app:1.0" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
		},
		{name: "the config's build before the index entry's", images: map[string]string{"example/app:1.0": "10.0.20348.1"}, entry: "10.0.17763.5820", base: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var opts []layertar.ExportOption
			if tc.base {
				opts = append(opts, layertar.WithEmptyHives())
			}
			desc, _ := f.layer(t, map[string]string{"a.txt": tc.name}, opts...)
			for name, v := range tc.images {
				if tc.entry != "" {
					f.indexedImage(t, name, v, tc.entry, desc)
				} else {
					f.image(t, name, v, desc)
				}
			}
			mounts := f.unpackMounts(t, "1")
			_, err := f.differ.Apply(f.ctx, desc, mounts)
			if !tc.refusing {
				if err != nil {
					t.Fatalf("Apply: %v", err)
				}
				return
			}
			var mismatch *winbuild.MismatchError
			if !errors.As(err, &mismatch) || !errdefs.IsFailedPrecondition(err) {
				t.Fatalf("Apply: %v, want a build mismatch (FailedPrecondition)", err)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("message:\n got %s\nwant %s", err, tc.wantErr)
			}
			l, _ := layermount.Decode(mounts)
			if entries, _ := os.ReadDir(l.Path); len(entries) != 0 {
				t.Errorf("refused layer wrote %d entries into the snapshot", len(entries))
			}
		})
	}
}

func TestApplyRejects(t *testing.T) {
	f := newFixture(t)
	desc, _ := f.layer(t, map[string]string{"a": "a"})
	rw := f.unpackMounts(t, "1")
	ro := []mount.Mount{layermount.Layer{Path: filepath.Join(f.sn.Root(), "snapshots", "9"), ReadOnly: true}.Mount()}
	tests := []struct {
		name   string
		desc   ocispec.Descriptor
		mounts []mount.Mount
		is     func(error) bool
	}{
		{"overlay mount", desc, []mount.Mount{{Type: "overlay", Source: "overlay"}}, errdefs.IsNotImplemented},
		{"read-only target", desc, ro, errdefs.IsInvalidArgument},
		{"unknown media type", ocispec.Descriptor{MediaType: "application/x-foo", Digest: desc.Digest, Size: desc.Size}, rw, errdefs.IsNotImplemented},
		{"blob not in store", ocispec.Descriptor{MediaType: desc.MediaType, Digest: digest.FromString("missing"), Size: 1}, rw, errdefs.IsNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.differ.Apply(f.ctx, tc.desc, tc.mounts); !tc.is(err) {
				t.Fatalf("Apply: %v", err)
			}
		})
	}
}

func TestCompareRoundTrip(t *testing.T) {
	f := newFixture(t)
	desc, _ := f.layer(t, map[string]string{"keep.txt": "keep", "gone.txt": "gone"})
	mounts := f.unpackMounts(t, "base")
	if _, err := f.differ.Apply(f.ctx, desc, mounts); err != nil {
		t.Fatal(err)
	}
	if err := f.sn.Commit(f.ctx, "base", "extract-base"); err != nil {
		t.Fatal(err)
	}

	// A container changes its scratch: a new file and, as overlayfs records
	// a deletion, a whiteout.
	upper, err := f.sn.Prepare(f.ctx, "container", "base")
	if err != nil {
		t.Fatal(err)
	}
	scratch, _ := layermount.Decode(upper)
	if err := os.WriteFile(filepath.Join(scratch.Path, "Files", "new.txt"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	whiteout(t, filepath.Join(scratch.Path, "Files", "gone.txt"))
	lower, err := f.sn.View(f.ctx, "lower", "base")
	if err != nil {
		t.Fatal(err)
	}

	diff, err := f.differ.Compare(f.ctx, lower, upper)
	if err != nil {
		t.Fatal(err)
	}
	info, err := f.store.Info(f.ctx, diff.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if diff.MediaType != ocispec.MediaTypeImageLayerGzip || info.Labels[labels.LabelUncompressed] == "" {
		t.Errorf("diff %+v with labels %v, want a gzip layer labelled with its uncompressed digest", diff, info.Labels)
	}

	// Applying the diff on the same base gives the container's view.
	target, err := f.sn.Prepare(f.ctx, "extract-diff", "base")
	if err != nil {
		t.Fatal(err)
	}
	applied, err := f.differ.Apply(f.ctx, diff, target)
	if err != nil {
		t.Fatal(err)
	}
	if applied.Digest.String() != info.Labels[labels.LabelUncompressed] {
		t.Errorf("applied diff ID %s, labelled %s", applied.Digest, info.Labels[labels.LabelUncompressed])
	}
	l, _ := layermount.Decode(target)
	if b, err := os.ReadFile(filepath.Join(l.Path, "Files", "new.txt")); err != nil || string(b) != "new" {
		t.Errorf("new.txt in applied diff: %q, %v", b, err)
	}
	if fi, err := os.Lstat(filepath.Join(l.Path, "Files", "gone.txt")); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("gone.txt in applied diff is not a whiteout: %v, %v", fi, err)
	}
}

func TestCompareRejectsUnrelatedLayers(t *testing.T) {
	f := newFixture(t)
	sn := func(id string) string { return filepath.Join(f.sn.Root(), "snapshots", id) }
	upper := []mount.Mount{layermount.Layer{Path: sn("3"), Parents: []string{sn("2")}}.Mount()}
	lower := []mount.Mount{layermount.Layer{Path: sn("9"), ReadOnly: true, Parents: []string{sn("1")}}.Mount()}
	if _, err := f.differ.Compare(f.ctx, lower, upper); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Compare: %v, want InvalidArgument", err)
	}
}

// Mounts of another snapshotter (containerd's own windows snapshotter hands
// out the same windows-layer mounts) are declined with NotImplemented, before
// the build check: containerd's diff service then tries its next differ,
// where a refusal would end the chain.
func TestDeclinesForeignSnapshots(t *testing.T) {
	f := newFixture(t)
	desc, _ := f.layer(t, map[string]string{"a.txt": "a"})
	f.image(t, "example/hyperv-only:1809", "10.0.17763.1", desc) // this host cannot run it
	other, err := snapshotter.New(f.ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	foreign, err := other.Prepare(f.ctx, "extract-foreign", "")
	if err != nil {
		t.Fatal(err)
	}
	escaping := []mount.Mount{layermount.Layer{Path: filepath.Join(f.sn.Root(), "snapshots", "..", "..", "elsewhere")}.Mount()}
	base := f.unpackMounts(t, "base")
	tests := []struct {
		name string
		run  func() error
	}{
		{"apply into another snapshotter's snapshot", func() error { _, err := f.differ.Apply(f.ctx, desc, foreign); return err }},
		{"apply to a path leaving the root", func() error { _, err := f.differ.Apply(f.ctx, desc, escaping); return err }},
		{"compare another snapshotter's snapshot", func() error { _, err := f.differ.Compare(f.ctx, base, foreign); return err }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); !errdefs.IsNotImplemented(err) {
				t.Fatalf("error %v, want NotImplemented", err)
			}
		})
	}
	l, _ := layermount.Decode(foreign)
	if entries, _ := os.ReadDir(l.Path); len(entries) != 0 {
		t.Errorf("declined apply wrote %d entries into the other snapshotter's snapshot", len(entries))
	}
}
