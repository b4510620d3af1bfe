//go:build linux

package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/winimage"
)

// hostProcessImage is a HostProcess image as Kubernetes' HostProcess base
// image makes them: one layer with the program, no Windows base, built for
// ltsc2019 on this ltsc2022 node.
const hostProcessImage = "winproc.test/agent:ltsc2019"

func importHostProcessImage(t *testing.T, n *node.Node) {
	t.Helper()
	ctx := context.Background()
	tree := t.TempDir()
	if err := os.WriteFile(filepath.Join(tree, "winproc-testapp.exe"), winBin(t, "winproc-testapp.exe"), 0o755); err != nil {
		t.Fatal(err)
	}
	layer, err := winimage.LayerFromTree(ctx, tree)
	if err != nil {
		t.Fatal(err)
	}
	img, err := winimage.Build(winimage.Config{OSVersion: "10.0.17763.1", Entrypoint: []string{"winproc-testapp.exe"}}, layer)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "agent.tar")
	if err := winimage.Write(ctx, archive, winimage.FormatOCIArchive, hostProcessImage, img); err != nil {
		t.Fatal(err)
	}
	if out, err := n.Ctr(ctx, "images", "import", "--platform", "windows/amd64", "--snapshotter", "windowsfilter", archive); err != nil {
		t.Fatalf("import the HostProcess image (built for ltsc2019, on an ltsc2022 node): %v\n%s", err, out)
	}
}

// hostProcessSecurity is the CRI security context of a HostProcess pod or
// container running as user.
func hostProcessSecurity(user string) map[string]any {
	return map[string]any{"security_context": map[string]any{"host_process": true, "run_as_username": user}}
}

// A HostProcess pod through crictl, as the kubelet runs kube-proxy or a
// CNI DaemonSet: no pause silo, containers as NT AUTHORITY\SYSTEM and as a
// local group, each on the node's network and file system with its own
// rootfs at its mount point; exec exit codes exact; the kinds of pod and
// container not mixed; nothing left.
func TestCRIHostProcess(t *testing.T) {
	forEachSandboxer(t, criHostProcess)
}

func criHostProcess(t *testing.T, sandboxer string) {
	n := node.StartWith(t, bins, node.Options{Sandboxer: sandboxer})
	importPodImages(t, n)
	importHostProcessImage(t, n)

	// What only the node's own network and file system have.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "the node's network") })}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	hostFile := filepath.Join(t.TempDir(), "node.txt")
	if err := os.WriteFile(hostFile, []byte("the node's files"), 0o644); err != nil {
		t.Fatal(err)
	}

	pod := runPodWith(t, n, "agents", hostProcessPodConfig(t))

	system := createHostProcess(t, n, pod, "system", `NT AUTHORITY\SYSTEM`, []string{"winproc-testapp.exe", "sleep", "-seconds", "0"})
	crictl(t, n, "start", system)
	waitLog(t, n, system, "ready")

	checkHostProcessExecs(t, n, system, "http://"+l.Addr().String()+"/", hostFile)

	// Exit codes exact: no shell between the command line and the program.
	for _, code := range []int{7, 255} {
		c := createHostProcess(t, n, pod, fmt.Sprint("exit", code), `NT AUTHORITY\SYSTEM`, []string{"winproc-testapp.exe", "exit", fmt.Sprint(code)})
		crictl(t, n, "start", c)
		if got := waitExited(t, n, c); got != code {
			t.Errorf("a container exiting %d: crictl inspect says %d", code, got)
		}
		crictl(t, n, "rm", c)
	}

	group := createHostProcess(t, n, pod, "group", `BUILTIN\Users`, []string{"winproc-testapp.exe", "env"})
	crictl(t, n, "start", group)
	if code := waitExited(t, n, group); code != 0 {
		t.Errorf("the group's container exited %d", code)
	}
	if u := inspect(t, n, group).Info.RuntimeSpec.Process.User.Username; u != `BUILTIN\Users` {
		t.Errorf("the group's container runs as %q", u)
	}
	if !strings.Contains(crictl(t, n, "logs", group), "CONTAINER_SANDBOX_MOUNT_POINT=") {
		t.Errorf("the group's container's log:\n%s", crictl(t, n, "logs", group))
	}

	// Kinds are not mixed: an ordinary container in a HostProcess pod.
	ordinary := containerConfig(t, "ordinary", testAppImage, []string{testApp, "env"}, nil)
	if out, err := n.Crictl(context.Background(), "create", pod, ordinary, hostProcessPodConfig(t)); err == nil || !strings.Contains(out, "HostProcess") {
		t.Errorf("an ordinary container in a HostProcess pod was not refused: %v\n%s", err, out)
	}

	// Graceful stop: the console event ends the app, exit 0.
	crictl(t, n, "stop", "-t", "10", system)
	if st := inspect(t, n, system).Status; st.State != "CONTAINER_EXITED" || st.ExitCode != 0 {
		t.Errorf("after stop: %s, exit code %d; want CONTAINER_EXITED and 0", st.State, st.ExitCode)
	}
	crictl(t, n, "rm", system, group)
	crictl(t, n, "stopp", pod)
	crictl(t, n, "rmp", pod)
	for _, id := range []string{system, group, pod} {
		if leaks := n.Leaks(id); len(leaks) > 0 {
			t.Errorf("left of %s: %v", id, leaks)
		}
	}
	// The node's HostProcess prefix goes with its last container, and
	// with it every mount of the emulation's.
	if _, err := os.Stat(filepath.Join(n.EmulationRoot(), ".hostprocess")); err == nil {
		t.Error("the host prefix outlived the node's HostProcess containers")
	}
	if m := emulatednode.Mounts(n.EmulationRoot()); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
}

// checkHostProcessExecs execs into HostProcess container system: its mount
// point and rootfs, the node's network (url, on its loopback) and files
// (hostFile), exact exit statuses and a missing program.
func checkHostProcessExecs(t *testing.T, n *node.Node, system, url, hostFile string) {
	t.Helper()
	env := crictl(t, n, "exec", "-s", system, "winproc-testapp.exe", "env")
	mountPoint := envValue(env, "CONTAINER_SANDBOX_MOUNT_POINT")
	if !strings.HasPrefix(strings.ToLower(mountPoint), `c:\hpc\`) {
		t.Errorf("CONTAINER_SANDBOX_MOUNT_POINT is %q, want one under C:\\hpc:\n%s", mountPoint, env)
	}
	// The rootfs at the mount point: the program was found there, and
	// is there by its full name.
	if out := crictl(t, n, "exec", "-s", system, "cmd", "/c", "dir", "/b", strings.TrimSuffix(mountPoint, `\`)+`\winproc-testapp.exe`); !strings.Contains(out, "winproc-testapp.exe") {
		t.Errorf("the rootfs at %s:\n%s", mountPoint, out)
	}
	if out := crictl(t, n, "exec", "-s", system, "winproc-testapp.exe", "get", url); !strings.Contains(out, "the node's network") {
		t.Errorf("a HostProcess container does not reach the node's loopback %s:\n%s", url, out)
	}
	if out := crictl(t, n, "exec", "-s", system, "cmd", "/c", "type", `Z:`+strings.ReplaceAll(hostFile, "/", `\`)); !strings.Contains(out, "the node's files") {
		t.Errorf("a HostProcess container does not see the node's file %s:\n%s", hostFile, out)
	}
	// crictl exec says only whether an exec failed; the exact code shows
	// as a container's (below).
	if _, err := n.Crictl(context.Background(), "exec", "-s", system, "winproc-testapp.exe", "exit", "0"); err != nil {
		t.Errorf("exec exit 0: %v", err)
	}
	if _, err := n.Crictl(context.Background(), "exec", "-s", system, "winproc-testapp.exe", "exit", "7"); err == nil {
		t.Error("exec exit 7 succeeded")
	}
	if out, err := n.Crictl(context.Background(), "exec", "-s", system, "no-such-program.exe"); err == nil || !strings.Contains(out, "no-such-program.exe") {
		t.Errorf("exec of a missing program: %v\n%s", err, out)
	}
}

// A HostProcess container in an ordinary pod is refused.
func TestCRIHostProcessInOrdinaryPod(t *testing.T) {
	n := node.StartWith(t, bins, node.Options{})
	importPodImages(t, n)
	importHostProcessImage(t, n)
	pod := runPod(t, n, "ordinary")
	cfg := containerConfig(t, "agent", hostProcessImage, []string{"winproc-testapp.exe", "env"}, map[string]any{"windows": hostProcessSecurity(`NT AUTHORITY\SYSTEM`)})
	if out, err := n.Crictl(context.Background(), "create", pod, cfg, podConfig(t, "ordinary")); err == nil || !strings.Contains(out, "HostProcess") {
		t.Errorf("a HostProcess container in an ordinary pod was not refused: %v\n%s", err, out)
	}
}

// createHostProcess creates a HostProcess container of the HostProcess
// image in pod, running as user.
func createHostProcess(t *testing.T, n *node.Node, pod, name, user string, args []string) string {
	t.Helper()
	cfg := containerConfig(t, name, hostProcessImage, args, map[string]any{"windows": hostProcessSecurity(user)})
	return lastLine(crictl(t, n, "create", pod, cfg, hostProcessPodConfig(t)))
}

// hostProcessPodConfig writes the CRI config of the HostProcess pod
// "agents", as the kubelet makes it: the host's network, no hostname.
func hostProcessPodConfig(t *testing.T) string {
	t.Helper()
	spec := podSpec(t, "agents", true)
	spec["hostname"] = ""
	spec["windows"] = hostProcessSecurity(`NT AUTHORITY\SYSTEM`)
	return writeJSON(t, "agents.json", spec)
}

// envValue is NAME's value in `winproc-testapp.exe env` output.
func envValue(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+"="); ok {
			return v
		}
	}
	return ""
}
