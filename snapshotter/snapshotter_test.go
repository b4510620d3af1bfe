package snapshotter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/snapshotter/layermount"
)

func newTestSnapshotter(t *testing.T) (*Snapshotter, context.Context) {
	t.Helper()
	ctx := context.Background()
	s, err := New(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, ctx
}

func decode(t *testing.T, mounts []mount.Mount) layermount.Layer {
	t.Helper()
	l, err := layermount.Decode(mounts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(des))
	for _, d := range des {
		names = append(names, d.Name())
	}
	sort.Strings(names)
	return names
}

// unpackLayer does what containerd's unpacker and the differ do for one
// layer: prepare an extract- snapshot, write the layer, commit it.
func unpackLayer(t *testing.T, ctx context.Context, s *Snapshotter, name, parent, file string) string {
	t.Helper()
	key := "extract-1 " + name
	l := decode(t, must(s.Prepare(ctx, key, parent)))
	if got := entries(t, l.Path); len(got) != 0 {
		t.Fatalf("unpack snapshot is not empty: %v", got)
	}
	if err := os.MkdirAll(filepath.Join(l.Path, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Path, "Files", file), []byte(name), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, name, key); err != nil {
		t.Fatal(err)
	}
	return l.Path
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestLayerChainAndScratch(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	base := unpackLayer(t, ctx, s, "base", "", "base.txt")
	app := unpackLayer(t, ctx, s, "app", "base", "app.txt")

	if filepath.Dir(base) != filepath.Join(s.Root(), "snapshots") || filepath.Base(base) != "1" {
		t.Errorf("base layer directory %s, want snapshots/1 under the root", base)
	}

	l := decode(t, must(s.Prepare(ctx, "container", "app", snapshots.WithLabels(map[string]string{rootfsSizeBytesLabel: "21474836480"}))))
	want := layermount.Layer{Path: l.Path, Parents: []string{app, base}}
	if !reflect.DeepEqual(l, want) {
		t.Fatalf("scratch mount %+v, want %+v (nearest parent first)", l, want)
	}
	if got := entries(t, l.Path); !reflect.DeepEqual(got, []string{"Files", "work"}) {
		t.Errorf("scratch holds %v, want [Files work]", got)
	}
	again := decode(t, must(s.Mounts(ctx, "container")))
	if !reflect.DeepEqual(again, l) {
		t.Errorf("Mounts = %+v, want what Prepare returned, %+v", again, l)
	}

	// Writing into the scratch and committing it makes a layer.
	if err := os.WriteFile(filepath.Join(l.Path, "Files", "new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, "committed", "container"); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, l.Path); !reflect.DeepEqual(got, []string{"Files"}) {
		t.Errorf("committed scratch holds %v, want [Files]", got)
	}
	info, err := s.Stat(ctx, "committed")
	if err != nil {
		t.Fatal(err)
	}
	if info.Kind != snapshots.KindCommitted || info.Parent != "app" {
		t.Errorf("Stat = %+v, want committed with parent app", info)
	}
	u, err := s.Usage(ctx, "committed")
	if err != nil {
		t.Fatal(err)
	}
	if u.Size <= 0 || u.Inodes < 2 {
		t.Errorf("usage of committed layer = %+v, want its file counted", u)
	}
}

func TestParentlessActiveIsNewBaseLayer(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	l := decode(t, must(s.Prepare(ctx, "new-base", "")))
	if l.ReadOnly || len(l.Parents) != 0 {
		t.Errorf("mount %+v, want rw without parents", l)
	}
	if got := entries(t, l.Path); !reflect.DeepEqual(got, []string{"Files"}) {
		t.Errorf("new base layer holds %v, want [Files]", got)
	}
}

func TestView(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	base := unpackLayer(t, ctx, s, "base", "", "a")
	l := decode(t, must(s.View(ctx, "view", "base")))
	if !l.ReadOnly || !reflect.DeepEqual(l.Parents, []string{base}) {
		t.Errorf("view mount %+v, want ro over [%s]", l, base)
	}
	// containerd's windows snapshotter (createSnapshot) gives a view over
	// layers a scratch like an active snapshot's, so runhcs can mount it.
	if got := entries(t, l.Path); !reflect.DeepEqual(got, []string{"Files", "work"}) {
		t.Errorf("view directory holds %v, want a scratch, [Files work]", got)
	}
	if got := entries(t, decode(t, must(s.View(ctx, "parentless-view", ""))).Path); !reflect.DeepEqual(got, []string{"Files"}) {
		t.Errorf("parentless view holds %v, want [Files] as a new base layer", got)
	}
	if err := s.Commit(ctx, "c", "view"); !errdefs.IsFailedPrecondition(err) {
		t.Errorf("Commit of a view: %v, want FailedPrecondition", err)
	}
}

func TestStatUpdateUsageWalk(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	unpackLayer(t, ctx, s, "base", "", "a")
	l := decode(t, must(s.Prepare(ctx, "active", "base", snapshots.WithLabels(map[string]string{"team": "a"}))))

	info, err := s.Update(ctx, snapshots.Info{Name: "active", Labels: map[string]string{"team": "b", "tier": "web"}}, "labels.team")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(info.Labels, map[string]string{"team": "b"}) {
		t.Errorf("labels after update of labels.team: %v", info.Labels)
	}

	before := must(s.Usage(ctx, "active"))
	if err := os.WriteFile(filepath.Join(l.Path, "Files", "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	after := must(s.Usage(ctx, "active"))
	if after.Size-before.Size < 1<<20 {
		t.Errorf("active usage grew by %d bytes after writing 1 MiB", after.Size-before.Size)
	}

	var names []string
	err = s.Walk(ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}, "labels.team==b")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(names, []string{"active"}) {
		t.Errorf("Walk with filter found %v, want [active]", names)
	}
}

func TestErrors(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	unpackLayer(t, ctx, s, "base", "", "a")
	if _, err := s.Prepare(ctx, "child", "base"); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		run  func() error
		is   error
	}{
		{"prepare with unknown parent", func() error { _, err := s.Prepare(ctx, "x", "no-such-parent"); return err }, errdefs.ErrNotFound},
		{"prepare existing key", func() error { _, err := s.Prepare(ctx, "child", "base"); return err }, errdefs.ErrAlreadyExists},
		{"commit missing key", func() error { return s.Commit(ctx, "n", "no-such-key") }, errdefs.ErrNotFound},
		{"commit to existing name", func() error { return s.Commit(ctx, "base", "child") }, errdefs.ErrAlreadyExists},
		{"remove with children", func() error { return s.Remove(ctx, "base") }, errdefs.ErrFailedPrecondition},
		{"remove missing", func() error { return s.Remove(ctx, "no-such-key") }, errdefs.ErrNotFound},
		{"stat missing", func() error { _, err := s.Stat(ctx, "no-such-key"); return err }, errdefs.ErrNotFound},
		{"mounts missing", func() error { _, err := s.Mounts(ctx, "no-such-key"); return err }, errdefs.ErrNotFound},
		{"bad size label", func() error {
			_, err := s.Prepare(ctx, "sized", "base", snapshots.WithLabels(map[string]string{rootfsSizeBytesLabel: "20G"}))
			return err
		}, errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := entries(t, filepath.Join(s.Root(), "snapshots"))
			err := tc.run()
			if !errors.Is(err, tc.is) {
				t.Fatalf("error %v, want %v", err, tc.is)
			}
			// A failed call leaves the disk as it was.
			if after := entries(t, filepath.Join(s.Root(), "snapshots")); !reflect.DeepEqual(before, after) {
				t.Errorf("snapshot directories changed from %v to %v", before, after)
			}
		})
	}
	if _, err := s.Stat(ctx, "base"); err != nil {
		t.Errorf("base is gone after a refused remove: %v", err)
	}
}

func TestRemoveLeavesNothing(t *testing.T) {
	s, ctx := newTestSnapshotter(t)
	unpackLayer(t, ctx, s, "base", "", "a")
	must(s.Prepare(ctx, "c1", "base"))
	for _, key := range []string{"c1", "base"} {
		if err := s.Remove(ctx, key); err != nil {
			t.Fatalf("remove %s: %v", key, err)
		}
	}
	if got := entries(t, filepath.Join(s.Root(), "snapshots")); len(got) != 0 {
		t.Errorf("snapshot directories left after removing everything: %v", got)
	}
}

func TestNewDestroysLeftovers(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := New(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	keep := unpackLayer(t, ctx, s, "base", "", "a")
	s.Close()

	// What a crash can leave: a removed snapshot not yet destroyed, and the
	// directory of a snapshot whose creation never committed.
	for _, d := range []string{"rm-7", "42"} {
		if err := os.MkdirAll(filepath.Join(root, "snapshots", d, "Files", "deep"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	s, err = New(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got := entries(t, filepath.Join(root, "snapshots")); !reflect.DeepEqual(got, []string{filepath.Base(keep)}) {
		t.Errorf("after restart snapshots/ holds %v, want only %s", got, filepath.Base(keep))
	}
	if _, err := os.Stat(filepath.Join(keep, "Files", "a")); err != nil {
		t.Errorf("known layer damaged by cleanup: %v", err)
	}
}

func TestScratchSize(t *testing.T) {
	tests := []struct {
		labels  map[string]string
		want    uint64
		wantErr bool
	}{
		{labels: nil, want: 0},
		{labels: map[string]string{rootfsSizeBytesLabel: "1048576"}, want: 1 << 20},
		{labels: map[string]string{rootfsSizeGBLabel: "20"}, want: 20 << 30},
		{labels: map[string]string{rootfsSizeGBLabel: "20", rootfsSizeBytesLabel: "5"}, want: 5},
		{labels: map[string]string{rootfsSizeBytesLabel: "-1"}, wantErr: true},
		{labels: map[string]string{rootfsSizeGBLabel: "lots"}, wantErr: true},
	}
	for _, tc := range tests {
		got, err := scratchSize(tc.labels)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("scratchSize(%v) = %d, %v; want %d, error %v", tc.labels, got, err, tc.want, tc.wantErr)
		}
	}
}
