//go:build linux

package winenode

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/winproc/winproc/internal/containerdnames"
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

// TestRebootThenDoctorFix: a node with an ordinary pod (HCS backend) and
// a HostProcess pod (job objects, a mount bound) running loses power
// (Node.Reboot: every process of the node ends at once, the bindings and
// the layers' activations are gone, what is on disk stays) and boots
// again. `winproc doctor -fix`, run once containerd.exe has recovered or
// before it starts, leaves nothing of the pods behind: no record, no
// layer activated or prepared, no C:\hpc entry, no binding, no compute
// system of winproc's in HCS, no shim or container process. What
// containerd still lists is removed through CRI, and doctor -fix then
// releases the pods' pause rootfs, which the dead sandbox shims' delete
// could not (containerd runs it before it serves): nothing is left.
//
// It is a fault run (`make faults`): it kills every process of the node,
// and crictl.exe's exit under Wine sometimes hangs after containerd.exe
// has answered (the Wine hang docs/test-node.md names), which a run of
// its own can tell from a winproc failure.
func TestRebootThenDoctorFix(t *testing.T) {
	if os.Getenv(FaultsEnv) == "" {
		t.Skipf("%s is not set: run `make faults`", FaultsEnv)
	}
	for _, first := range []string{"containerd", "doctor"} {
		t.Run(first+" first", func(t *testing.T) { rebootThenDoctorFix(t, first == "doctor") })
	}
}

func rebootThenDoctorFix(t *testing.T, doctorFirst bool) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	importTree(t, n, agentImage, "10.0.17763.1", "winproc-testapp.exe")

	web := criJSON(t, "pod.json", map[string]any{
		"metadata": map[string]any{"name": "web", "namespace": "default", "uid": "uid-web"},
	})
	webID := criRun(t, n, "runp", web)
	app := criCreatePod(t, n, webID, web, "app", nil, `C:\winproc-testapp.exe`, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	criRun(t, n, "start", app)

	agents := criJSON(t, "pod.json", map[string]any{
		"metadata":    map[string]any{"name": "agents", "namespace": "kube-system", "uid": "uid-agents"},
		"windows":     hostProcess(`NT AUTHORITY\SYSTEM`, true),
		"annotations": inheritUser,
	})
	agentsID := criRun(t, n, "runp", agents)
	mounts := map[string]any{"mounts": []map[string]any{{"container_path": `C:\var\data`, "host_path": WindowsPath(t.TempDir())}}}
	agent := criCreateWith(t, n, agentsID, agents, "agent", mounts, "winproc-testapp.exe", "sleep", "-seconds", "600")
	criRun(t, n, "start", agent)
	waitFor(t, "both containers' processes", func() bool { return len(n.Processes("winproc-testapp.exe")) == 2 })
	if len(n.mappings()) == 0 || len(n.activeLayers()) == 0 || len(n.records()) == 0 {
		t.Fatalf("before the reboot: bindings %v, active layers %v, records %v; want some of each", n.mappings(), n.activeLayers(), n.records())
	}

	doctorFix := func() {
		out, err := n.Run(InstallDir+`\winproc.exe`, "doctor", "-fix")
		if !regexp.MustCompile(`(?m)^OK +orphans `).MatchString(out) {
			t.Errorf("doctor -fix: %v\n%s", err, out)
		}
	}
	if doctorFirst {
		n.Reboot(doctorFix)
	} else {
		n.Reboot(nil)
		doctorFix()
	}
	if r := n.records(); len(r) != 0 {
		t.Errorf("records left after doctor -fix: %v", r)
	}
	if l := n.activeLayers(); len(l) != 0 {
		t.Errorf("layers activated or prepared after doctor -fix: %v", l)
	}
	if m := n.mappings(); len(m) != 0 {
		t.Errorf("bindings or mount points left after doctor -fix: %v", m)
	}
	for _, name := range []string{"containerd-shim-winproc-v2.exe", "winproc-testapp.exe", "pause.exe"} {
		if pids := n.Processes(name); len(pids) != 0 {
			t.Errorf("%s processes left after doctor -fix: %v", name, pids)
		}
	}

	// containerd's view after its recovery: the pods and containers it
	// still lists, none running, are removed through CRI.
	pods := strings.Fields(criRun(t, n, "pods", "-q", "--state", "ready"))
	running := strings.Fields(criRun(t, n, "ps", "-q", "--state", "running"))
	if len(pods) != 0 || len(running) != 0 {
		t.Errorf("after the reboot containerd lists pods %v ready and containers %v running", pods, running)
	}
	for _, c := range strings.Fields(criRun(t, n, "ps", "-a", "-q")) {
		criRun(t, n, "rm", "-f", c)
	}
	for _, p := range strings.Fields(criRun(t, n, "pods", "-q")) {
		criRun(t, n, "stopp", p)
		criRun(t, n, "rmp", p)
	}
	doctorFix()
	n.checkNothingLeft()
	out, _ := n.Run(InstallDir+`\winproc.exe`, "doctor")
	if !regexp.MustCompile(`(?m)^OK +orphans `).MatchString(out) {
		t.Errorf("doctor finds orphans at the end:\n%s", out)
	}
}

// records lists the files of winproc's record directories: the HCS
// backend's and the HostProcess backend's.
func (n *Node) records() []string {
	n.t.Helper()
	var out []string
	for _, dir := range []string{containerdnames.ShimStateDirWindows, containerdnames.JobContainerStateDirWindows} {
		entries, err := os.ReadDir(n.Path(dir))
		if err != nil && !os.IsNotExist(err) {
			n.t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, dir+`\`+e.Name())
		}
	}
	return out
}

// mappings lists the stand-in bind filter's mappings and C:\hpc's
// entries (the HostProcess containers' mount points).
func (n *Node) mappings() []string {
	n.t.Helper()
	var out []string
	for _, dir := range []string{`C:\ProgramData\winproc-standins\mappings`, `C:\hpc`} {
		entries, err := os.ReadDir(n.Path(dir))
		if err != nil && !os.IsNotExist(err) {
			n.t.Fatal(err)
		}
		for _, e := range entries {
			out = append(out, dir+`\`+e.Name())
		}
	}
	return out
}
