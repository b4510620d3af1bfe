//go:build linux

package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/node"
)

// Deadlines of the calls snapshotterFaults makes while layers are refused.
const (
	imageRemoveDeadline = 30 * time.Second
	gcDeadline          = time.Minute
	// sweepDeadline bounds the wait for the sweep once the faults clear:
	// it has backed off to once a minute at most.
	sweepDeadline = 2 * time.Minute
)

// snapshotterFaults imports count images and makes the layer of each
// immutable (chattr +i: the emulation's access denied), the directory
// itself for even ones, a file in it for odd ones, while the images are
// removed and containerd's garbage collection runs. Every call must return
// by its deadline and every image and its snapshots go; once the faults
// clear, the snapshotter's sweep must leave no snapshot directory beyond
// those there before. It returns the images, the calls made, those within
// their deadline, the images removed, and the directories left.
func snapshotterFaults(t *testing.T, n *node.Node, count int) (images, calls, inDeadline, removed int, left string) {
	t.Helper()
	ctx := context.Background()
	snapshotsRoot := filepath.Join(n.SnapshotterRoot, "snapshots")
	before := dirNames(t, snapshotsRoot)
	keysBefore := len(ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls"))
	imagesBefore := ctrRows(t, n, "images", "ls", "-q")

	// held are the immutable paths, each also under the name its layer has
	// once renamed for removal; the faults clear where they are found.
	var held []string
	clearFaults := func() {
		for _, p := range held {
			if _, err := os.Lstat(p); err == nil {
				chattr(t, "-i", p)
			}
		}
		held = nil
	}
	t.Cleanup(clearFaults)
	refs := make([]string, count)
	for i := range refs {
		refs[i] = fmt.Sprintf("example.com/winproc/snapshotter-fault-%d:test", i)
		marker := fmt.Sprintf("fault-%d.txt", i)
		archive := imageArchive(t, refs[i], node.HostBuild+".1", testApp, map[string][]byte{marker: []byte(refs[i])})
		if out, err := n.Ctr(ctx, "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive); err != nil {
			t.Fatalf("import %s: %v\n%s", refs[i], err, out)
		}
		layer := layerWith(t, snapshotsRoot, marker)
		rel := ""
		if i%2 == 1 {
			rel = filepath.Join("Files", marker)
		}
		chattr(t, "+i", filepath.Join(layer, rel))
		held = append(held, filepath.Join(layer, rel), filepath.Join(snapshotsRoot, "rm-"+filepath.Base(layer), rel))
	}

	timed := func(deadline time.Duration, args ...string) {
		calls++
		cctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		start := time.Now()
		out, err := n.Ctr(cctx, args...)
		if err == nil && time.Since(start) <= deadline {
			inDeadline++
			return
		}
		t.Errorf("ctr %s: %v after %v\n%s", strings.Join(args, " "), err, time.Since(start), out)
	}
	// The image records: the refs, and those containerd's CRI adds by
	// image id.
	for _, name := range ctrRows(t, n, "images", "ls", "-q") {
		if !slices.Contains(imagesBefore, name) {
			timed(imageRemoveDeadline, "images", "rm", name)
		}
	}
	timed(gcDeadline, "leases", "create", "--id", "snapshotter-faults-gc")
	timed(gcDeadline, "leases", "delete", "--sync", "snapshotter-faults-gc")

	listed, err := n.Ctr(ctx, "images", "ls", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range refs {
		if !strings.Contains(listed, ref) {
			removed++
		}
	}
	if keys := len(ctrRows(t, n, "snapshots", "--snapshotter", "windowsfilter", "ls")); keys != keysBefore {
		t.Errorf("%d snapshots after the removals, %d before", keys, keysBefore)
		removed = 0
	}

	t.Logf("while the faults held, the sweep has %q", beyond(t, snapshotsRoot, before))
	clearFaults()
	cleared := time.Now()
	for {
		left = beyond(t, snapshotsRoot, before)
		if left == "" {
			t.Logf("swept %v after the faults cleared", time.Since(cleared))
		}
		if left == "" || time.Since(cleared) > sweepDeadline {
			return count, calls, inDeadline, removed, left
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// beyond lists the snapshot directories not in before; directories other
// removals left for the sweep may have gone meanwhile.
func beyond(t *testing.T, snapshotsRoot string, before []string) string {
	var extra []string
	for _, d := range dirNames(t, snapshotsRoot) {
		if !slices.Contains(before, d) {
			extra = append(extra, d)
		}
	}
	return strings.Join(extra, " ")
}

// layerWith returns the snapshot directory whose Files holds name.
func layerWith(t *testing.T, snapshotsRoot, name string) string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(snapshotsRoot, "*", "Files", name))
	if err != nil || len(found) != 1 {
		t.Fatalf("the layer holding %s: %v %v", name, found, err)
	}
	return filepath.Dir(filepath.Dir(found[0]))
}

// chattr sets or clears (flag "+i", "-i") the immutable attribute of path.
func chattr(t *testing.T, flag, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
		t.Errorf("chattr %s %s: %v: %s", flag, path, err, out)
	}
}
