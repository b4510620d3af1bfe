//go:build linux

package winenode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/winenode/hcscontract"
	"github.com/winproc/winproc/shim/hcs"
)

// TestDoctorFindsSystemsInHCS: a compute system of owner winproc that a
// process now gone made (no record, no shim, no task; made without
// ShouldTerminateOnLastHandleClosed, so its creator's exit left it
// running) is found by `winproc doctor`, in a process of its own, through
// HCS's enumeration only (the stand-in service's), and `doctor -fix` ends
// it through HCS; then HCS lists nothing of winproc's.
func TestDoctorFindsSystemsInHCS(t *testing.T) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	client := hcsClient(t, n)
	const id = "left-by-a-dead-client"
	vol := `\\?\Volume{0d0c70e5-0000-4000-8000-00000000a11e}`
	if err := os.MkdirAll(n.Path(`C:\leftvolume`), 0o755); err != nil {
		t.Fatal(err)
	}
	state := n.Path(`C:\ProgramData\winproc-standins\volumes\` + hcscontract.VolumeStateName(vol))
	if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(state, hcscontract.VolumeState(`C:\leftvolume`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{
		hcscontract.HelperEnv + "=" + strings.Join([]string{id, vol, "keep", hcs.Owner}, "|"),
		hcscontract.StandinEnv + `=C:\windows\system32\computecore.dll`,
	}
	if out, stderr, err := n.Exec("", env, client); err != nil {
		t.Fatalf("the HCS client that makes the system: %v\n%s%s", err, out, stderr)
	}

	out, _ := n.Run(InstallDir+`\winproc.exe`, "doctor")
	if !regexp.MustCompile(`(?m)^FAIL +orphans `).MatchString(out) || !strings.Contains(out, id) || !strings.Contains(out, "HCS state Running") {
		t.Fatalf("doctor did not find the system in HCS:\n%s", out)
	}
	out, err := n.Run(InstallDir+`\winproc.exe`, "doctor", "-fix")
	if !strings.Contains(out, "removed 1 compute systems") {
		t.Fatalf("doctor -fix: %v\n%s", err, out)
	}
	out, _ = n.Run(InstallDir+`\winproc.exe`, "doctor")
	if !regexp.MustCompile(`(?m)^OK +orphans `).MatchString(out) {
		t.Errorf("doctor after -fix still finds orphans:\n%s", out)
	}
}

// hcsClient builds hcscontract's Windows test binary, an HCS client of
// the node's stand-in in its helper mode, into the node.
func hcsClient(t *testing.T, n *Node) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	exe := n.Path(`C:\hcsclient.exe`)
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", exe, "./hcscontract")
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the HCS client: %v\n%s", err, b)
	}
	return `C:\hcsclient.exe`
}

// TestDeadShimsSystemsEnd: the shim makes its compute systems with
// ShouldTerminateOnLastHandleClosed, as runhcs does (shim/hcs
// document.go; hcsshim internal/hcsoci/create.go), so HCS ends a dead
// shim's containers with it: once the shim is killed, no container
// process is left running, and after containerd's clean-up `winproc
// doctor` finds nothing left behind, in HCS or in records.
func TestDeadShimsSystemsEnd(t *testing.T) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata": map[string]any{"name": "dies", "namespace": "default", "uid": "uid-dies"},
	})
	id := criRun(t, n, "runp", pod)
	app := criCreatePod(t, n, id, pod, "app", nil, `C:\winproc-testapp.exe`, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	criRun(t, n, "start", app)
	waitFor(t, "the container's process", func() bool { return len(n.Processes("winproc-testapp.exe")) > 0 })

	n.KillShims()
	waitFor(t, "the dead shim's container processes ended by HCS", func() bool {
		return len(n.Processes("winproc-testapp.exe")) == 0 && len(n.Processes("pause.exe")) == 0
	})
	waitFor(t, "doctor finding nothing left behind", func() bool {
		out, _ := n.Run(InstallDir+`\winproc.exe`, "doctor")
		return regexp.MustCompile(`(?m)^OK +orphans `).MatchString(out)
	})
}

// TestHCSServiceGoesUnderAPod: HCS's service ends under a running pod (a
// crash of vmcompute; its containers' processes end with it, as at a
// reboot) and is started again by the next call, knowing no system. The
// shim hears HcsEventServiceDisconnect, the pod is stopped and removed
// through CRI by its deadline, and nothing is left.
func TestHCSServiceGoesUnderAPod(t *testing.T) {
	n := startNodeWith(t, Options{Standins: true, Sandboxer: "shim", DefaultHandler: true})
	importTree(t, n, appImage, HostBuild+".1", "winproc-testapp.exe")
	importTree(t, n, PauseImage, HostBuild+".1", "pause.exe")
	pod := criJSON(t, "pod.json", map[string]any{
		"metadata": map[string]any{"name": "outlived", "namespace": "default", "uid": "uid-outlived"},
	})
	id := criRun(t, n, "runp", pod)
	app := criCreatePod(t, n, id, pod, "app", nil, `C:\winproc-testapp.exe`, "serve", "-addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
	criRun(t, n, "start", app)
	waitFor(t, "the container's process", func() bool { return len(n.Processes("winproc-testapp.exe")) > 0 })

	if pids := n.Processes(HCSService); len(pids) != 1 {
		t.Fatalf("%s processes: %v, want one for the node", HCSService, pids)
	}
	for _, name := range []string{HCSService, "winproc-testapp.exe", "pause.exe"} {
		for _, pid := range n.Processes(name) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("kill %s %d: %v", name, pid, err)
			}
		}
	}
	waitFor(t, "the container's exit reported", func() bool {
		return strings.Contains(criRun(t, n, "inspect", "-o", "json", app), `"CONTAINER_EXITED"`)
	})
	criRun(t, n, "rm", app)
	criRun(t, n, "stopp", id)
	criRun(t, n, "rmp", id)
	n.checkNothingLeft()
	out, _ := n.Run(InstallDir+`\winproc.exe`, "doctor")
	if !regexp.MustCompile(`(?m)^OK +orphans `).MatchString(out) {
		t.Errorf("doctor after the service's restart finds orphans:\n%s", out)
	}
}
