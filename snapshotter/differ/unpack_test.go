//go:build linux

package differ

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/containerd/v2/core/diff"
	"github.com/containerd/containerd/v2/core/images"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/core/unpack"
	"github.com/containerd/errdefs"
	"github.com/containerd/platforms"
	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/identity"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/semaphore"

	"github.com/winproc/winproc/snapshotter"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/snapshotter/layertar"
)

// entry is a tar entry of a test layer.
type entry struct {
	name, body, link string
	typ              byte
}

func dir(name string) entry          { return entry{name: name, typ: tar.TypeDir} }
func file(name, body string) entry   { return entry{name: name, body: body, typ: tar.TypeReg} }
func hardlink(name, to string) entry { return entry{name: name, link: to, typ: tar.TypeLink} }
func symlink(name, to string) entry  { return entry{name: name, link: to, typ: tar.TypeSymlink} }

// whiteoutOf is the whiteout entry name (".wh.<name>" or the opaque marker).
func whiteoutOf(name string) entry { return entry{name: name, typ: tar.TypeReg} }

// layerTar writes a Windows-format layer tar of es.
func layerTar(t *testing.T, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range es {
		attr := "32"
		if e.typ == tar.TypeDir {
			attr = "16"
		}
		mt := time.Unix(1700000000+int64(i)*3600, int64(i)*100)
		hdr := &tar.Header{Format: tar.FormatPAX, Name: e.name, Typeflag: e.typ, Linkname: e.link, Size: int64(len(e.body)), Mode: 0o644, ModTime: mt,
			PAXRecords: map[string]string{"MSWINDOWS.fileattr": attr, "LIBARCHIVE.creationtime": fmt.Sprint(1600000000 + i)}}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chainLayers are four layers with what a unpack must keep: Windows
// metadata and times, hard links, a symlink, an alternate data stream,
// whiteouts of lower files, an opaque directory, a directory deleted and
// brought back, and a layer of many files.
func chainLayers(t *testing.T) [][]byte {
	many := []entry{dir("Files"), dir("Files/many")}
	for i := range 300 {
		many = append(many, file(fmt.Sprintf("Files/many/f%03d.dll", i), fmt.Sprint("data ", i)))
	}
	return [][]byte{
		layerTar(t, dir("Files"), dir("Files/Windows"), dir("Files/Windows/System32"),
			file("Files/Windows/System32/kernel32.dll", "kernel32"), file("Files/Windows/System32/kernel32.dll:Zone.Identifier", "[ZoneTransfer]"),
			hardlink("Files/Windows/System32/hard.dll", "Files/Windows/System32/kernel32.dll"),
			dir("Files/old"), file("Files/old/gone.txt", "gone"), dir("Files/keep"), file("Files/keep/x.txt", "x"),
			dir("Files/app"), file("Files/app/a.txt", "a"), symlink("Files/sys", `Windows\System32`),
			dir("Hives"), file("Hives/SOFTWARE_BASE", "hive")),
		layerTar(t, dir("Files"), dir("Files/old"), whiteoutOf("Files/old/.wh.gone.txt"),
			dir("Files/app"), whiteoutOf("Files/app/.wh..wh..opq"), file("Files/app/new.txt", "new"),
			file("Files/keep/x.txt", "x2"), file("Files/Windows/System32/k2.dll", "k2"), hardlink("Files/Windows/System32/k3.dll", "Files/Windows/System32/k2.dll")),
		layerTar(t, dir("Files"), whiteoutOf("Files/.wh.keep"), dir("Files/keep"), file("Files/keep/y.txt", "y")),
		layerTar(t, many...),
	}
}

// recorder wraps the snapshotter and the differ to see what containerd's
// unpacker asks of them.
type recorder struct {
	*snapshotter.Snapshotter
	d        *Differ
	mu       sync.Mutex
	parents  []string // of every unpack Prepare, in order
	applies  atomic.Int32
	applying atomic.Int32
	most     atomic.Int32 // the most Applies at once
}

func (r *recorder) Prepare(ctx context.Context, key, parent string, opts ...snapshots.Opt) ([]mount.Mount, error) {
	r.mu.Lock()
	r.parents = append(r.parents, parent)
	r.mu.Unlock()
	return r.Snapshotter.Prepare(ctx, key, parent, opts...)
}

func (r *recorder) Apply(ctx context.Context, desc ocispec.Descriptor, mounts []mount.Mount, opts ...diff.ApplyOpt) (ocispec.Descriptor, error) {
	r.applies.Add(1)
	n := r.applying.Add(1)
	defer r.applying.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	return r.d.Apply(ctx, desc, mounts, opts...)
}

// pullImage stores an image of layers (gzip) in f's content store, as a
// pull leaves it before the unpack, and returns its manifest and the
// layers' chain IDs.
func (f *fixture) pullImage(t *testing.T, layers [][]byte) (ocispec.Descriptor, []digest.Digest) {
	t.Helper()
	var descs []ocispec.Descriptor
	var diffIDs []digest.Digest
	mlabels := map[string]string{}
	for i, l := range layers {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(l)
		zw.Close()
		descs = append(descs, f.write(t, ocispec.MediaTypeImageLayerGzip, gz.Bytes(), nil))
		diffIDs = append(diffIDs, digest.FromBytes(l))
		mlabels[gcLayerPrefix+fmt.Sprint(i)] = descs[i].Digest.String()
	}
	cfg, _ := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: "windows", Architecture: "amd64", OSVersion: "10.0.20348.1"},
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
	})
	cfgDesc := f.write(t, ocispec.MediaTypeImageConfig, cfg, nil)
	mlabels[gcConfigLabel] = cfgDesc.Digest.String()
	m, _ := json.Marshal(ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, Config: cfgDesc, Layers: descs})
	mDesc := f.write(t, ocispec.MediaTypeImageManifest, m, mlabels)
	f.records[mDesc.Digest] = "example/chain:1"
	return mDesc, identity.ChainIDs(diffIDs)
}

// unpackImage unpacks manifest with containerd's unpacker into r, in
// parallel when parallel is set (an unpack limiter and the rebase
// capability, as the emulation's config gives containerd).
func unpackImage(ctx context.Context, f *fixture, r *recorder, manifest ocispec.Descriptor, parallel bool) error {
	p := unpack.Platform{Platform: platforms.All, SnapshotterKey: "windowsfilter", Snapshotter: r, Applier: r}
	opts := []unpack.UnpackerOpt{}
	if parallel {
		p.SnapshotterCapabilities = []string{snapshots.RebaseCap}
		opts = append(opts, unpack.WithUnpackLimiter(semaphore.NewWeighted(3)))
	}
	u, err := unpack.NewUnpacker(ctx, f.store, append(opts, unpack.WithUnpackPlatform(p))...)
	if err != nil {
		return err
	}
	if err := images.Dispatch(ctx, u.Unpack(images.ChildrenHandler(f.store)), nil, manifest); err != nil {
		u.Wait()
		return err
	}
	_, err = u.Wait()
	return err
}

// exports returns the export (layertar.Export) of every layer of the chain
// chainIDs in r's snapshotter, bottom first, and checks each layer's parent.
func exports(t *testing.T, ctx context.Context, r *recorder, chainIDs []digest.Digest) [][]byte {
	t.Helper()
	for i, c := range chainIDs {
		info, err := r.Stat(ctx, c.String())
		if err != nil {
			t.Fatal(err)
		}
		if want := ""; i > 0 && info.Parent != chainIDs[i-1].String() || i == 0 && info.Parent != want {
			t.Errorf("layer %d has parent %q, want the layer below", i, info.Parent)
		}
	}
	view, err := r.View(ctx, "view", chainIDs[len(chainIDs)-1].String())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Remove(ctx, "view")
	l, err := layermount.Decode(view)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for i := len(l.Parents) - 1; i >= 0; i-- {
		var b bytes.Buffer
		if err := layertar.Export(ctx, &b, l.Parents[i]); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Bytes())
	}
	return out
}

// tarEntries lists the names and types of a tar's entries.
func tarEntries(t *testing.T, b []byte) map[string]byte {
	t.Helper()
	out := map[string]byte{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		hdr, err := tr.Next()
		if err != nil {
			return out
		}
		out[hdr.Name] = hdr.Typeflag
	}
}

// containerd's parallel unpack (each layer prepared without its parent,
// given it at commit) leaves the same snapshots as its sequential unpack:
// the same layers, chained the same, each exporting to the same tar
// (files, Windows metadata, times, whiteouts, opaque directories, hard
// links, symlinks, streams).
func TestParallelUnpackMatchesSequential(t *testing.T) {
	layers := chainLayers(t)
	var got [2][][]byte
	for i, parallel := range []bool{false, true} {
		f := newFixture(t)
		r := &recorder{Snapshotter: f.sn, d: f.differ}
		manifest, chainIDs := f.pullImage(t, layers)
		if err := unpackImage(f.ctx, f, r, manifest, parallel); err != nil {
			t.Fatalf("unpack (parallel %v): %v", parallel, err)
		}
		for j, p := range r.parents {
			want := ""
			if j > 0 && !parallel {
				want = chainIDs[j-1].String()
			}
			if p != want {
				t.Errorf("parallel %v: layer %d prepared on %q, want %q", parallel, j, p, want)
			}
		}
		got[i] = exports(t, f.ctx, r, chainIDs)
		t.Logf("parallel %v: %d applies, at most %d at once", parallel, r.applies.Load(), r.most.Load())
	}
	for i := range got[0] {
		if !bytes.Equal(got[0][i], got[1][i]) {
			t.Errorf("layer %d: the parallel unpack's export differs from the sequential one's", i)
		}
	}
	// The exports hold what the comparison is about.
	l0, l1, l2 := tarEntries(t, got[0][0]), tarEntries(t, got[0][1]), tarEntries(t, got[0][2])
	for _, c := range []struct {
		entries map[string]byte
		name    string
		typ     byte
	}{
		// Names sharing an inode export as a file and links to it, in
		// byte order.
		{l0, "Files/Windows/System32/kernel32.dll", tar.TypeLink},
		{l0, "Files/Windows/System32/kernel32.dll:Zone.Identifier", tar.TypeReg},
		{l0, "Files/sys", tar.TypeSymlink},
		{l1, "Files/old/.wh.gone.txt", tar.TypeReg},
		// An opaque directory exports as its whiteout and itself.
		{l1, "Files/.wh.app", tar.TypeReg},
		{l1, "Files/Windows/System32/k3.dll", tar.TypeLink},
		{l2, "Files/.wh.keep", tar.TypeReg},
		{l2, "Files/keep/y.txt", tar.TypeReg},
	} {
		if typ, ok := c.entries[c.name]; !ok || typ != c.typ {
			t.Errorf("export lacks %s (type %q)", c.name, c.typ)
		}
	}
}

// A hostile layer in the middle of a chain is refused in either unpack:
// nothing is written outside the layer, its snapshot and those above it are
// gone, and the layers below it stay committed, as sequentially.
func TestUnpackRefusesHostileLayer(t *testing.T) {
	for _, parallel := range []bool{false, true} {
		t.Run(fmt.Sprintf("parallel %v", parallel), func(t *testing.T) {
			outside := t.TempDir()
			layers := chainLayers(t)
			layers[2] = layerTar(t, dir("Files"), file("Files/fine.txt", "fine"),
				symlink("Files/out", outside), file("Files/out/pwned.txt", "pwned"))
			f := newFixture(t)
			r := &recorder{Snapshotter: f.sn, d: f.differ}
			manifest, chainIDs := f.pullImage(t, layers)
			err := unpackImage(f.ctx, f, r, manifest, parallel)
			if !errdefs.IsInvalidArgument(err) || !errors.Is(err, layertar.ErrUnsafePath) {
				t.Fatalf("unpack: %v, want the layer refused as unsafe", err)
			}
			if _, err := os.Lstat(filepath.Join(outside, "pwned.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the hostile layer wrote outside: %v", err)
			}
			var names []string
			r.Walk(f.ctx, func(_ context.Context, info snapshots.Info) error {
				if info.Kind != snapshots.KindCommitted {
					t.Errorf("snapshot %s left %v", info.Name, info.Kind)
				}
				names = append(names, info.Name)
				return nil
			})
			slices.Sort(names)
			want := []string{chainIDs[0].String(), chainIDs[1].String()}
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Errorf("snapshots %v, want the two layers below the hostile one", names)
			}
			dirs, err := os.ReadDir(layermount.SnapshotsDir(f.sn.Root()))
			if err != nil {
				t.Fatal(err)
			}
			if len(dirs) != 2 {
				t.Errorf("%d snapshot directories left, want the 2 committed ones", len(dirs))
			}
		})
	}
}

// Two pulls unpacking one image at once through the client (no lock of
// containerd's transfer service between them) extract each layer once: the
// second waits for the first's extraction and skips the layer.
func TestConcurrentUnpacksExtractOnce(t *testing.T) {
	f := newFixture(t)
	layers := chainLayers(t)
	manifest, chainIDs := f.pullImage(t, layers)
	r := &recorder{Snapshotter: f.sn, d: f.differ}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = unpackImage(f.ctx, f, r, manifest, false)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("unpack %d: %v", i, err)
		}
	}
	if n := r.applies.Load(); n != int32(len(layers)) {
		t.Errorf("%d layers applied for two unpacks of %d layers, want each once", n, len(layers))
	}
	exports(t, f.ctx, r, chainIDs)
}
