//go:build linux

package winenode

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// layerBootMarkers are the layer stand-in's per-boot state
// (testdata/standins/vmcompute.c): a layer's activation and preparation,
// and its volume's name. A reboot ends them on Windows: an activated
// layer is a VHD attached and filtered, and an attached VHD is detached
// at shutdown, even one attached with
// ATTACH_VIRTUAL_DISK_FLAG_PERMANENT_LIFETIME ("attached until
// DetachVirtualDisk is called or the system restarts", Microsoft's
// ATTACH_VIRTUAL_DISK_FLAG page).
var layerBootMarkers = []string{"standin-active", "standin-prepared"}

// standinVolumes is where the layer stand-in names its prepared layers'
// volumes.
const standinVolumes = `C:\ProgramData\winproc-standins\volumes`

// Reboot simulates a power loss and restart of the node: every process of
// the node (containerd.exe, winproc-snapshotter.exe, the shims, the HCS
// stand-in service and every container's process) ends at once, without
// a word, as the prefix's wineserver ends them; the bind filter's
// mappings and the layers' activations, which live only until a reboot
// on Windows, are dropped; what is on disk stays (containerd's root and
// state, winproc's records, the snapshots). Then containerd.exe and
// winproc-snapshotter.exe start again, as the node's services do at boot;
// the HCS service starts again at its first use. atBoot, if not nil,
// runs before the services start, as what an administrator runs first.
func (n *Node) Reboot(atBoot func()) {
	n.t.Helper()
	n.killAll()
	deadline := time.Now().Add(30 * time.Second)
	for len(n.Processes("")) > 0 {
		if time.Now().After(deadline) {
			n.t.Fatalf("the node's processes %v still run 30 s after wineserver -k", n.Processes(""))
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.RebootBindFilter()
	n.rebootLayers()
	if atBoot != nil {
		atBoot()
	}
	n.startServices()
}

// killAll ends every process of the node at once, as the prefix's
// wineserver ends them; a node whose processes are all gone already (no
// wineserver to ask) is no error.
func (n *Node) killAll() {
	n.t.Helper()
	if len(n.Processes("")) == 0 {
		return
	}
	kill := exec.Command("wineserver", "-k")
	kill.Env = winetest.Env(n.prefix)
	if out, err := kill.CombinedOutput(); err != nil {
		n.t.Errorf("wineserver -k: %v\n%s", err, out)
	}
}

// rebootLayers drops the layer stand-in's per-boot state of every layer
// under the snapshotter's root.
func (n *Node) rebootLayers() {
	n.t.Helper()
	err := filepath.WalkDir(n.Path(SnapshotterRoot), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, m := range layerBootMarkers {
			if d.Name() == m {
				return os.Remove(p)
			}
		}
		return nil
	})
	if err == nil {
		err = os.RemoveAll(n.Path(standinVolumes))
	}
	if err != nil {
		n.t.Fatalf("simulate a reboot of the layers: %v", err)
	}
}

// activeLayers lists the layers under the snapshotter's root the layer
// stand-in holds activated or prepared.
func (n *Node) activeLayers() []string {
	n.t.Helper()
	var out []string
	err := filepath.WalkDir(n.Path(SnapshotterRoot), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		for _, m := range layerBootMarkers {
			if d.Name() == m {
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		n.t.Fatal(err)
	}
	return out
}
