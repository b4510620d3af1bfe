//go:build linux

package integration

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"github.com/containerd/containerd/v2/core/leases"
	leasesproxy "github.com/containerd/containerd/v2/core/leases/proxy"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/errdefs"
	"google.golang.org/grpc"

	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/internal/containerdconn"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/pauseimage"
	"github.com/winproc/winproc/snapshotter/layermount"
	"github.com/winproc/winproc/winbuild"
	"github.com/winproc/winproc/winimage"
)

// dialContainerd connects to the node's containerd as the shim does: raw
// gRPC, no containerd client.
func dialContainerd(t *testing.T, n *node.Node) *grpc.ClientConn {
	t.Helper()
	conn, err := containerdconn.Dial(n.Address)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func hostBuild(t *testing.T) winbuild.Version {
	t.Helper()
	host, err := winbuild.Parse(node.HostBuild)
	if err != nil {
		t.Fatal(err)
	}
	return host
}

// importImage imports the archive into windowsfilter, unpacking it unless
// told not to.
func importImage(t *testing.T, n *node.Node, archive string, unpack bool) {
	t.Helper()
	args := []string{"images", "import", "--platform", containerdnames.Platform, "--snapshotter", containerdnames.Snapshotter}
	if !unpack {
		args = append(args, "--no-unpack")
	}
	if _, err := n.Ctr(context.Background(), append(args, archive)...); err != nil {
		t.Fatal(err)
	}
}

// ctrOut runs ctr and returns its output.
func ctrOut(t *testing.T, n *node.Node, args ...string) string {
	t.Helper()
	out, err := n.Ctr(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pauseRootfsLeft lists the leases and snapshots of pause rootfses left in
// the node.
func pauseRootfsLeft(t *testing.T, n *node.Node) []string {
	t.Helper()
	var left []string
	for _, args := range [][]string{{"leases", "ls"}, {"snapshots", "--snapshotter", containerdnames.Snapshotter, "ls"}} {
		for _, line := range strings.Split(ctrOut(t, n, args...), "\n") {
			if strings.Contains(line, pauseimage.Key("")) {
				left = append(left, strings.Join(args, " ")+": "+line)
			}
		}
	}
	return left
}

func TestPauseImagePrepare(t *testing.T) {
	n := node.Start(t, bins)
	conn := dialContainerd(t, n)
	ctx := namespaces.WithNamespace(context.Background(), node.Namespace)
	const ref = "example.com/winproc/pause:test"
	importImage(t, n, pauseImage(t, ref, node.HostBuild+".1"), true)
	layers := snapshotDirs(t, n)

	rootfs, release, err := pauseimage.Prepare(ctx, conn, containerdnames.Snapshotter, ref, "pod1", hostBuild(t))
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	released := false
	t.Cleanup(func() {
		if !released {
			release(context.Background())
		}
	})

	l := checkPauseRootfs(t, n, rootfs, layers, ref)

	// The lease exists and holds the snapshot: the lease header reached the
	// snapshot service.
	if out := ctrOut(t, n, "leases", "ls"); !strings.Contains(out, "winproc-sandbox-pod1") {
		t.Errorf("ctr leases ls has no winproc-sandbox-pod1:\n%s", out)
	}
	resources, err := leasesproxy.NewLeaseManager(leasesapi.NewLeasesClient(conn)).ListResources(ctx, leases.Lease{ID: "winproc-sandbox-pod1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (leases.Resource{ID: "winproc-sandbox-pod1", Type: "snapshots/" + containerdnames.Snapshotter}); !slices.Contains(resources, want) {
		t.Errorf("lease resources %+v, want %+v", resources, want)
	}
	activeSnapshot := func() bool {
		for _, line := range strings.Split(ctrOut(t, n, "snapshots", "--snapshotter", containerdnames.Snapshotter, "ls"), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "winproc-sandbox-pod1" && f[2] == "Active" {
				return true
			}
		}
		return false
	}
	if !activeSnapshot() {
		t.Fatalf("no active snapshot winproc-sandbox-pod1:\n%s", ctrOut(t, n, "snapshots", "--snapshotter", containerdnames.Snapshotter, "ls"))
	}

	// A second Prepare for the sandbox is refused and leaves the first
	// alone.
	if _, _, err := pauseimage.Prepare(ctx, conn, containerdnames.Snapshotter, ref, "pod1", hostBuild(t)); !errdefs.IsAlreadyExists(err) {
		t.Errorf("second Prepare: %v", err)
	}
	if !activeSnapshot() {
		t.Fatal("a second Prepare dropped the first one's snapshot")
	}

	// Garbage collection keeps it, even with the image gone: the lease
	// holds the scratch, the scratch its parents.
	if err := n.RemoveImages(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !activeSnapshot() || !exists(l.Path) || !exists(l.Parents[0]) || !exists(l.Parents[1]) {
		t.Fatalf("garbage collection took the leased pause rootfs: %v", snapshotDirs(t, n))
	}

	// Release, twice, from a context without namespace.
	for i := range 2 {
		if err := release(context.Background()); err != nil {
			t.Fatalf("release %d: %v", i+1, err)
		}
	}
	released = true
	if left := pauseRootfsLeft(t, n); len(left) > 0 {
		t.Errorf("left after release: %v", left)
	}
	if err := n.CollectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if exists(l.Path) {
		t.Errorf("scratch %s left after release and garbage collection", l.Path)
	}
	if left := snapshotDirs(t, n); len(left) != 0 {
		t.Errorf("snapshot directories left: %v", left)
	}
}

// checkPauseRootfs checks the pause rootfs Prepare made of image ref: a
// scratch on the image's layers, and the image's entrypoint. It returns
// the rootfs's mount.
func checkPauseRootfs(t *testing.T, n *node.Node, rootfs *pauseimage.Rootfs, layers []string, ref string) layermount.Layer {
	t.Helper()
	l, err := layermount.Decode(rootfs.Mounts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rootfs: %+v, mount %+v", rootfs, l)
	if l.ReadOnly || len(l.Parents) != 2 || !strings.HasPrefix(l.Path, n.SnapshotterRoot+"/") {
		t.Errorf("mount %+v: want a writable scratch under %s on 2 layers", l, n.SnapshotterRoot)
	}
	slices.Sort(layers)
	if parents := slices.Sorted(slices.Values(l.Parents)); !slices.Equal(parents, layers) {
		t.Errorf("parent layers %v, want the image's %v", parents, layers)
	}
	if !exists(filepath.Join(l.Parents[0], "Files", winimage.PauseExePath)) {
		t.Errorf("nearest parent %s has no pause.exe", l.Parents[0])
	}
	if !slices.Equal(rootfs.Args, []string{winimage.PauseEntrypoint}) || !slices.Contains(rootfs.Env, winimage.PauseEnvPath) ||
		rootfs.OSVersion != node.HostBuild+".1" || rootfs.Image != ref || rootfs.Snapshot != "winproc-sandbox-pod1" {
		t.Errorf("rootfs %+v", rootfs)
	}
	return l
}

func TestPauseImageRefuses(t *testing.T) {
	n := node.Start(t, bins)
	conn := dialContainerd(t, n)
	ctx := namespaces.WithNamespace(context.Background(), node.Namespace)
	host := hostBuild(t)

	// Not unpacked: the pause image imported with --no-unpack (first: the
	// image below shares no top layer with it).
	const packed = "example.com/winproc/pause:packed"
	importImage(t, n, pauseImage(t, packed, node.HostBuild+".1"), false)
	// Built for ltsc2019: our differ refuses to unpack it.
	const old = "example.com/winproc/pause:ltsc2019"
	importImage(t, n, pauseImage(t, old, "10.0.17763.1"), false)
	// Without pause.exe, though its entrypoint names it.
	const nopause = "example.com/winproc/pause:nopause"
	importImage(t, n, noPauseImage(t, nopause), true)
	layers := snapshotDirs(t, n)

	tests := []struct {
		image string
		is    func(error) bool
		want  []string
	}{
		{image: "example.com/winproc/pause:missing", is: errdefs.IsNotFound,
			want: []string{`pause image "example.com/winproc/pause:missing" is not in containerd`, "crictl pull example.com/winproc/pause:missing", "pause_image"}},
		{image: packed, is: errdefs.IsFailedPrecondition,
			want: []string{`pause image "` + packed + `" is not unpacked for the windowsfilter snapshotter`, "--snapshotter windowsfilter"}},
		{image: old, is: func(err error) bool { var m *winbuild.MismatchError; return errors.As(err, &m) },
			want: []string{`image "` + old + `" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`}},
		{image: nopause, is: errdefs.IsFailedPrecondition,
			want: []string{`pause image "` + nopause + `" has no C:\pause.exe (its entrypoint)`}},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			rootfs, release, err := pauseimage.Prepare(ctx, conn, containerdnames.Snapshotter, tc.image, "bad", host)
			if err == nil {
				release(context.Background())
				t.Fatalf("Prepare succeeded: %+v", rootfs)
			}
			t.Logf("Prepare: %v", err)
			if !tc.is(err) {
				t.Errorf("error class: %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q", w)
				}
			}
			if left := pauseRootfsLeft(t, n); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
		})
	}

	// Nothing to collect but what the images hold.
	if err := n.CollectGarbage(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left := snapshotDirs(t, n); !slices.Equal(left, layers) {
		t.Errorf("snapshot directories %v, want the images' %v", left, layers)
	}
	if err := n.RemoveImages(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// noPauseImage builds an image whose entrypoint is C:\pause.exe but whose
// layers lack it, and returns its archive.
func noPauseImage(t *testing.T, ref string) string {
	return imageArchive(t, ref, node.HostBuild+".1", winimage.PauseEntrypoint, map[string][]byte{"readme.txt": []byte("no pause here\r\n")})
}
