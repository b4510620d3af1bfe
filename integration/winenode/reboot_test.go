//go:build linux

package winenode

import (
	"strings"
	"testing"
)

// TestCRIHostProcessAfterReboot: the node loses a running HostProcess
// pod's bindings (the bind filter keeps none across a reboot) and its
// shim; crictl's stop and removal still release everything, though
// BfRemoveMapping answers ERROR_INVALID_PARAMETER for each binding: the
// shim's delete releases the record, the scratch and the rootfs, and
// nothing is left.
func TestCRIHostProcessAfterReboot(t *testing.T) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	importTree(t, n, agentImage, "10.0.17763.1", "winproc-testapp.exe")
	logs := t.TempDir()
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "agents", "namespace": "kube-system", "uid": "uid-agents"},
		"log_directory": WindowsPath(logs),
		"windows":       hostProcess(`NT AUTHORITY\SYSTEM`, true),
		"annotations":   inheritUser,
	})
	id := criRun(t, n, "runp", pod)
	mounts := map[string]any{"mounts": []map[string]any{{"container_path": `C:\var\data`, "host_path": WindowsPath(t.TempDir())}}}
	c := criCreateWith(t, n, id, pod, "agent", mounts, "winproc-testapp.exe", "sleep", "-seconds", "600")
	criRun(t, n, "start", c)
	if out := criRun(t, n, "ps", "--pod", id, "-q"); !strings.Contains(out, c) {
		t.Fatalf("crictl ps --pod lists %q, not the container", out)
	}

	n.RebootBindFilter()
	n.KillShims()
	waitFor(t, "the container's process to end with its job", func() bool { return len(n.Processes("winproc-testapp.exe")) == 0 })

	// containerd's CRI learns of the exit asynchronously, through its
	// cleanup of the dead shim (the shim's delete).
	waitFor(t, "the container's removal", func() bool {
		_, _, err := n.Crictl("rm", "-f", c)
		return err == nil
	})
	criRun(t, n, "stopp", id)
	criRun(t, n, "rmp", id)
	n.checkNothingLeft()
}
