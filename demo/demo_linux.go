//go:build linux

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/integration/emulatednode"
	"github.com/winproc/winproc/shim/options"
)

const (
	namespace = emulatednode.Namespace // CRI's containerd namespace
	handler   = emulatednode.Handler
	hostBuild = "10.0.20348" // the Windows build the emulated node claims (ltsc2022)
	osVersion = hostBuild + ".1"
	pauseRef  = "example.com/winproc/pause:demo"
	appRef    = "example.com/winproc/testapp:demo"
	oldRef    = "example.com/winproc/pause:ltsc2019"
	podName   = "demo"
	testApp   = `C:\winproc-testapp.exe`
	wincatExe = `C:\Windows\System32\wincat.exe`
)

// demo is one run.
type demo struct {
	cfg Config
	t   *transcript

	dir         string // everything of this run lives below dir
	bin, winBin string
	env         []string // of the shown shell: PATH, CONTAINERD_*, CRI_CONFIG_FILE
	node        *emulatednode.Node

	snapshotter, containerd *emulatednode.Daemon
	pod, app                string // the pod's and the app container's IDs
	podIP                   net.IP
	port                    int

	// cleanups undo what the steps made, last first; each is harmless once
	// the teardown step has done its work.
	cleanups []func()
	// noiseNoted is set once the transcript said it leaves out ctr's
	// cgroup v1 warning.
	noiseNoted bool
}

// Run runs the demo, printing its transcript to cfg.Out. Whatever happens,
// it leaves no process, mount or file of its own behind.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	d := &demo{cfg: cfg, t: &transcript{w: cfg.Out}}
	began := time.Now()
	defer func() {
		if cerr := d.cleanup(err != nil, ctx.Err() != nil); cerr != nil {
			err = errors.Join(err, cerr)
		}
		if err == nil {
			fmt.Fprintf(cfg.Out, "\ndemo finished in %v: no process, mount or file of it is left.\n", time.Since(began).Round(100*time.Millisecond))
		}
	}()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"prerequisites", d.check},
		{"node directory", d.setup},
		{"binaries", d.binaries},
		{"config", d.config},
		{"start the node", d.start},
		{"images", d.images},
		{"pod", d.runPod},
		{"container", d.startContainer},
		{"exec", d.exec},
		{"pod network", d.podNetwork},
		{"port-forward", d.portForward},
		{"statistics", d.stats},
		{"teardown", d.teardown},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted before %s: %w", s.name, err)
		}
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("demo step %q failed: %w", s.name, err)
		}
	}
	return nil
}

func (d *demo) check(ctx context.Context) error {
	if os.Geteuid() != 0 {
		return errors.New("the emulation mounts overlay file systems: run the demo as root")
	}
	if d.cfg.Tools == "" {
		return errors.New("no tools directory: run `make demo`, or pass -tools (a directory holding containerd, ctr and crictl from `make tools`)")
	}
	for _, b := range []string{"containerd", "ctr", "crictl"} {
		if _, err := os.Stat(filepath.Join(d.cfg.Tools, b)); err != nil {
			return fmt.Errorf("%s: run `make tools`: %w", b, err)
		}
	}
	if d.cfg.WinePrefix == "" {
		return errors.New("no Wine prefix: run `make demo`, or pass -wine-prefix (the template prefix from `make wine`)")
	}
	if _, err := os.Stat(filepath.Join(d.cfg.WinePrefix, "system.reg")); err != nil {
		return fmt.Errorf("%s is not a Wine prefix: run `make wine`: %w", d.cfg.WinePrefix, err)
	}
	if _, err := exec.LookPath("wine"); err != nil {
		return fmt.Errorf("wine is not installed: run `make wine`: %w", err)
	}
	return nil
}

func (d *demo) setup(ctx context.Context) error {
	// Unix socket paths are limited to 108 bytes: keep the directory short.
	dir, err := os.MkdirTemp("", "wpn-demo-")
	if err != nil {
		return err
	}
	d.dir = dir
	d.bin, d.winBin = d.cfg.Bin, d.cfg.WindowsBin
	if d.bin == "" {
		d.bin = filepath.Join(dir, "bin")
	}
	if d.winBin == "" {
		d.winBin = filepath.Join(dir, "bin", "windows")
	}
	path := d.bin + ":" + d.cfg.Tools + ":" + os.Getenv("PATH")
	d.env = append(os.Environ(),
		"PATH="+path,
		"CONTAINERD_ADDRESS="+filepath.Join(dir, "containerd.sock"),
		"CONTAINERD_NAMESPACE="+namespace,
		"CRI_CONFIG_FILE="+filepath.Join(dir, "crictl.yaml"),
	)
	d.node = emulatednode.New(emulatednode.Config{Dir: dir, Tools: d.cfg.Tools, Bin: d.bin, Options: d.options(), HostBuild: hostBuild, Env: d.env})
	crictl, err := d.node.WriteCrictlConfig()
	if err != nil {
		return err
	}

	d.t.section("An emulated Windows node in a temporary directory")
	d.t.note(
		"winproc runs Windows process-isolated containers. This machine is Linux, so the shim uses",
		"its emulation backend: every compute system is a Wine \"silo\" (its own prefix, wineserver",
		"and overlay C: drive). containerd, crictl, the snapshotter and the shim are the real ones.",
	)
	d.t.command("export PATH=" + d.bin + ":" + d.cfg.Tools + ":$PATH")
	d.t.command("mkdir " + dir + " && cd " + dir)
	d.t.dir = dir
	d.t.command("export CONTAINERD_ADDRESS=$PWD/containerd.sock CONTAINERD_NAMESPACE=k8s.io   # for ctr")
	d.t.command("export CRI_CONFIG_FILE=$PWD/crictl.yaml   # for crictl")
	d.t.command("cat crictl.yaml")
	d.t.output(string(crictl))
	return nil
}

func (d *demo) binaries(ctx context.Context) error {
	d.t.section("Binaries")
	if d.cfg.Bin == "" || d.cfg.WindowsBin == "" {
		d.t.note("Built from this module: the Linux side, and the Windows programs the images carry.")
		if d.cfg.Bin == "" {
			if err := d.goBuild(ctx, "linux", d.bin, "containerd-shim-winproc-v2", "winproc-snapshotter", "winproc"); err != nil {
				return err
			}
		}
		if d.cfg.WindowsBin == "" {
			if err := d.goBuild(ctx, "windows", d.winBin, "pause", "wincat", "winproc-testapp"); err != nil {
				return err
			}
		}
	} else {
		d.t.note("Built by `make build windows`: the Linux side, and the Windows programs the images carry.")
	}
	for _, f := range []string{
		filepath.Join(d.bin, "containerd-shim-winproc-v2"), filepath.Join(d.bin, "winproc-snapshotter"), filepath.Join(d.bin, "winproc"),
		filepath.Join(d.winBin, "pause.exe"), filepath.Join(d.winBin, "wincat.exe"), filepath.Join(d.winBin, "winproc-testapp.exe"),
	} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("missing binary: %w", err)
		}
	}
	_, err := d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "-version")
	return err
}

// goBuild builds the commands cmds of the winproc module in the working
// directory for goos into dir.
func (d *demo) goBuild(ctx context.Context, goos, dir string, cmds ...string) error {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.HasPrefix(string(b), "module github.com/winproc/winproc\n") {
		return errors.New("run the demo from the winproc module's directory, or pass -bin and -windows-bin (`make demo` does)")
	}
	argv := []string{"go", "-C", root, "build", "-o", dir + "/"}
	for _, c := range cmds {
		argv = append(argv, "./cmd/"+c)
	}
	line := strings.Join(argv, " ")
	if goos != "linux" {
		line = "GOOS=" + goos + " " + line
	}
	d.t.command(line)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	d.t.output(string(out))
	if err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	return nil
}

// options are the winproc handler's runtime options on this node.
func (d *demo) options() options.Options {
	return options.Options{WineTemplatePrefix: d.cfg.WinePrefix, PauseImage: pauseRef, HostBuild: hostBuild}
}

func (d *demo) config(ctx context.Context) error {
	config, err := d.node.WriteConfig()
	if err != nil {
		return err
	}
	d.t.section("containerd's config, from the project's generator (containerdconfig)")
	d.t.note(
		"The winproc handler (sandboxer \"shim\": the shim owns the pod and its pause container),",
		"windowsfilter snapshotter and differ as proxy plugins on winproc-snapshotter's socket, and",
		"the unpack rule for windows/amd64 layers. root, state and sockets are private to this",
		"directory; the options carry the Wine template prefix and the pause image.",
	)
	d.t.command("cat config.toml")
	d.t.output(string(config))
	return nil
}

func (d *demo) start(ctx context.Context) error {
	d.t.section("Start winproc-snapshotter and containerd")
	var err error
	if d.snapshotter, err = d.startDaemon("winproc-snapshotter", "snapshotter.log", d.node.SnapshotterArgv(), d.node.SnapshotterAddress); err != nil {
		return err
	}
	// containerd finds containerd-shim-winproc-v2 on its PATH.
	if d.containerd, err = d.startDaemon("containerd", "containerd.log", d.node.ContainerdArgv(), d.node.Address); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := d.quiet(ctx, d.tool("ctr"), "version"); err == nil {
			break
		} else if time.Now().After(deadline) || !d.containerd.Alive() {
			return fmt.Errorf("containerd does not answer: %w\n%s", err, d.logTail("containerd.log", 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "version"); err != nil {
		return err
	}
	out, err := d.quiet(ctx, d.tool("ctr"), "plugins", "ls")
	if err != nil {
		return err
	}
	d.t.command("ctr plugins ls | grep windowsfilter")
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "windowsfilter") {
			lines = append(lines, l)
		}
	}
	d.t.output(strings.Join(lines, "\n"))
	if len(lines) != 2 || strings.Count(strings.Join(lines, "\n"), " ok") != 2 {
		return fmt.Errorf("the windowsfilter snapshotter and differ are not both loaded:\n%s", out)
	}
	return nil
}

func (d *demo) images(ctx context.Context) error {
	d.t.section("Build the pause and test-app images, import them")
	d.t.note(
		"`winproc image` writes Windows-format images (Files/ and Hives/ layers, os.version set):",
		"the pause image holds C:\\pause.exe and C:\\Windows\\System32\\wincat.exe on a synthetic base",
		"layer; the test app is one layer more. On a real node the base is nanoserver (-base-layout).",
	)
	if _, err := d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "image", "pause",
		"-pause-exe", filepath.Join(d.winBin, "pause.exe"), "-wincat-exe", filepath.Join(d.winBin, "wincat.exe"),
		"-os-version", osVersion, "-ref", pauseRef, "-format", "docker-archive", "-output", filepath.Join(d.dir, "pause.tar")); err != nil {
		return err
	}
	tree := filepath.Join(d.dir, "app")
	d.t.command("mkdir app && cp " + filepath.Join(d.winBin, "winproc-testapp.exe") + " app/")
	if err := os.Mkdir(tree, 0o755); err != nil {
		return err
	}
	if err := copyFile(filepath.Join(d.winBin, "winproc-testapp.exe"), filepath.Join(tree, "winproc-testapp.exe")); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "image", "build",
		"-os-version", osVersion, "-tree", tree, "-entrypoint", testApp,
		"-ref", appRef, "-output", filepath.Join(d.dir, "testapp.tar")); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "image", "inspect", "-host-build", hostBuild, filepath.Join(d.dir, "testapp.tar")); err != nil {
		return err
	}
	d.t.note(
		"Build matching at unpack: this node is 10.0.20348 (ltsc2022); process isolation cannot run",
		"an ltsc2019 image, and winproc's differ refuses to unpack one (containerd's own would unpack",
		"it, and the container would fail only when it starts). So this import is refused:")
	if _, err := d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "image", "pause",
		"-pause-exe", filepath.Join(d.winBin, "pause.exe"), "-wincat-exe", filepath.Join(d.winBin, "wincat.exe"),
		"-os-version", "10.0.17763.1", "-ref", oldRef, "-output", filepath.Join(d.dir, "pause-ltsc2019.tar")); err != nil {
		return err
	}
	out, err := d.sh(ctx, "", d.tool("ctr"), "images", "import", "--platform", "windows/amd64",
		"--snapshotter", containerdnames.Snapshotter, filepath.Join(d.dir, "pause-ltsc2019.tar"))
	const want = "process isolation needs an image for 10.0.20348 (ltsc2022)"
	if err == nil || !strings.Contains(out, want) {
		return fmt.Errorf("importing an ltsc2019 image: want a failure saying %q, got %v", want, err)
	}
	d.t.note("(refused, as it should be)", "", "The images this node can run: ctr unpacks their layers through winproc-snapshotter's", "differ into windowsfilter snapshots.")
	for _, archive := range []string{"pause.tar", "testapp.tar"} {
		if _, err := d.sh(ctx, "", d.tool("ctr"), "images", "import", "--platform", "windows/amd64",
			"--snapshotter", containerdnames.Snapshotter, filepath.Join(d.dir, archive)); err != nil {
			return err
		}
	}
	if _, err := d.sh(ctx, "", d.tool("ctr"), "snapshots", "--snapshotter", containerdnames.Snapshotter, "ls"); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "images"); err != nil {
		return err
	}
	d.t.note("`winproc doctor` checks the node's setup (config, handler, proxies, unpack rule, shim,",
		"containerd, snapshotter, pause image) and says how to fix what is wrong:")
	_, err = d.sh(ctx, "", filepath.Join(d.bin, "winproc"), "doctor", "-config", filepath.Join(d.dir, "config.toml"))
	return err
}

func (d *demo) runPod(ctx context.Context) error {
	d.t.section("Run a pod through CRI")
	cfg := map[string]any{
		"metadata":      map[string]any{"name": podName, "namespace": "default", "uid": "uid-" + podName, "attempt": 0},
		"hostname":      podName,
		"log_directory": filepath.Join(d.dir, "logs"),
		"dns_config":    map[string]any{"servers": []string{"10.0.0.10"}, "searches": []string{"default.svc.cluster.local"}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "pod.json"), b, 0o644); err != nil {
		return err
	}
	d.t.note(
		"A pod with a network of its own: containerd makes it a network namespace, where the node's",
		"CNI (bridge, host-local) gives it an address. The runtime handler winproc sends the pod to",
		"containerd-shim-winproc-v2's sandbox API, which prepares the pause image's rootfs and",
		"starts C:\\pause.exe in the pod's compute system, every process of which runs in that",
		"namespace (on Windows: the pod's HNS namespace).",
	)
	d.t.command("cat pod.json")
	d.t.output(string(b))
	out, err := d.sh(ctx, "", d.tool("crictl"), "runp", "--runtime", handler, filepath.Join(d.dir, "pod.json"))
	if err != nil {
		return err
	}
	d.pod = lastLine(out)
	d.cleanups = append(d.cleanups, func() {
		d.quiet(context.Background(), d.tool("crictl"), "stopp", d.pod)
		d.quiet(context.Background(), d.tool("crictl"), "rmp", d.pod)
	})
	if _, err = d.sh(ctx, "", d.tool("crictl"), "pods"); err != nil {
		return err
	}
	ip, err := d.sh(ctx, "", d.tool("crictl"), "inspectp", "-o", "go-template", "--template", "{{.status.network.ip}}", d.pod)
	if err != nil {
		return err
	}
	if d.podIP = net.ParseIP(strings.TrimSpace(ip)); d.podIP == nil || !d.node.PodSubnet.Contains(d.podIP) {
		return fmt.Errorf("the pod's address %q is not in the node's pod network %s", ip, d.node.PodSubnet)
	}
	return nil
}

func (d *demo) startContainer(ctx context.Context) error {
	d.t.section("Start the test app in the pod")
	d.t.note(
		"`crictl create` and `crictl start`, as the kubelet does. This node's containerd is v2.4.2",
		"with a small patch that lets its CRI, built for Linux, make a Windows container's spec as",
		"its Windows build does (docs/test-node.md); the winproc handler does the rest.",
	)
	var err error
	if d.port, err = freePort(); err != nil {
		return err
	}
	container, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": "app"},
		"image":    map[string]any{"image": appRef},
		"command":  []string{testApp, "serve", "-addr", fmt.Sprintf("0.0.0.0:%d", d.port)},
		"envs":     []map[string]string{{"key": "GREETING", "value": "hello from the winproc demo"}},
		"log_path": "app.log",
	})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "container.json"), append(container, '\n'), 0o644); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", "cat", "container.json"); err != nil {
		return err
	}
	out, err := d.sh(ctx, "", d.tool("crictl"), "create", d.pod, filepath.Join(d.dir, "container.json"), filepath.Join(d.dir, "pod.json"))
	if err != nil {
		return err
	}
	d.app = lastLine(out)
	d.cleanups = append(d.cleanups, func() {
		d.quiet(context.Background(), d.tool("crictl"), "stop", "-t", "0", d.app)
		d.quiet(context.Background(), d.tool("crictl"), "rm", "-f", d.app)
	})
	if _, err := d.sh(ctx, "", d.tool("crictl"), "start", d.app); err != nil {
		return err
	}
	if err := d.waitLog(ctx, "listening on"); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "ps"); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("ctr"), "tasks", "ls"); err != nil {
		return err
	}
	ps, err := d.sh(ctx, "", d.tool("ctr"), "tasks", "ps", d.app)
	if err != nil {
		return err
	}
	var names []string
	for _, l := range strings.Split(ps, "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Trim(f[0], "0123456789") == "" {
			comm, _ := os.ReadFile(filepath.Join("/proc", f[0], "comm"))
			names = append(names, f[0]+" "+strings.TrimSpace(string(comm)))
		}
	}
	d.t.note("The container's processes: its Wine silo's (" + strings.Join(names, ", ") + ").")
	shims := d.node.Shims()
	if len(shims) != 1 {
		return fmt.Errorf("shims serving this node: %v, want one (the container joins its pod's shim)", shims)
	}
	d.t.note(fmt.Sprintf("One shim (PID %d) serves the pod and its container.", shims[0]))
	_, err = d.sh(ctx, "", d.tool("crictl"), "logs", d.app)
	return err
}

// waitLog waits until the app's log, as crictl shows it, holds want.
func (d *demo) waitLog(ctx context.Context, want string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := d.quiet(ctx, d.tool("crictl"), "logs", d.app)
		if err == nil && strings.Contains(out, want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the app's log has no %q after a minute: %v\n%s", want, err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *demo) exec(ctx context.Context) error {
	d.t.section("Exec into the container")
	out, err := d.sh(ctx, "", d.tool("crictl"), "exec", "-s", d.app, testApp, "env")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "GREETING=hello from the winproc demo") {
		return errors.New("exec of env: the output lacks the container's environment")
	}
	return nil
}

func (d *demo) podNetwork(ctx context.Context) error {
	d.t.section("The pod's network")
	url := fmt.Sprintf("http://%s/", net.JoinHostPort(d.podIP.String(), fmt.Sprint(d.port)))
	d.t.note("The app listens in the pod's namespace; the host reaches it at the pod's address (the way",
		"containerd 2.x on Windows port-forwards):")
	d.t.call("http.Get(" + strconv.Quote(url) + ")")
	body, err := httpGet(ctx, url)
	if err != nil {
		return err
	}
	d.t.output(body)
	if !strings.Contains(body, "hello from winproc-testapp") {
		return fmt.Errorf("the app at the pod's address answered %q", body)
	}

	local, err := freePort()
	if err != nil {
		return err
	}
	d.t.note("`crictl port-forward`: containerd's streaming server, built for Linux, dials localhost",
		"inside the pod's namespace.")
	display := d.t.shellLine([]string{d.tool("crictl"), "port-forward", d.pod, fmt.Sprintf("%d:%d", local, d.port)}) + " &"
	d.t.command(display)
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	forward := exec.CommandContext(fctx, d.tool("crictl"), "port-forward", d.pod, fmt.Sprintf("%d:%d", local, d.port))
	forward.Dir, forward.Env = d.dir, d.env
	if err := forward.Start(); err != nil {
		return err
	}
	defer func() {
		cancel()
		forward.Wait()
	}()
	localURL := fmt.Sprintf("http://127.0.0.1:%d/", local)
	d.t.call("http.Get(" + strconv.Quote(localURL) + ")")
	deadline := time.Now().Add(30 * time.Second)
	for {
		body, err = httpGet(ctx, localURL)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("through crictl port-forward: %w", err)
	}
	d.t.output(body)
	return nil
}

// httpGet returns the body at url.
func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func (d *demo) portForward(ctx context.Context) error {
	d.t.section("Port-forward through wincat in the pod's sandbox")
	d.t.note(
		"containerd 1.7's port-forward on Windows: exec `wincat.exe 127.0.0.1 PORT` in the sandbox (the",
		"pause container) and carry the connection on the exec's stdin and stdout. containerd 2.x",
		"keeps no container record for a sandbox the shim owns (`ctr tasks ls` lists its pause task,",
		"but `ctr tasks exec` answers \"not found\"), so the exec goes to the shim's task API",
		"directly, on the ttrpc socket the container's bootstrap.json names.",
	)
	if _, err := d.sh(ctx, "", "cat", d.bootstrapPath()); err != nil {
		return err
	}
	ctx = namespaces.WithNamespace(ctx, namespace)
	shimConn, err := d.node.DialShim(ctx, d.app)
	if err != nil {
		return err
	}
	defer shimConn.Close()
	shim := taskAPI.NewTTRPCTaskClient(shimConn)

	fifos, err := cio.NewFIFOSetInDir(filepath.Join(d.dir, "fifo"), "wincat", false)
	if err != nil {
		return err
	}
	stdio, err := cio.NewDirectIO(ctx, fifos)
	if err != nil {
		return err
	}
	defer stdio.Close()
	procSpec, err := json.Marshal(&specs.Process{Args: []string{wincatExe, "127.0.0.1", fmt.Sprint(d.port)}, Cwd: `C:\`})
	if err != nil {
		return err
	}
	d.t.call(fmt.Sprintf("shim.Exec(ctx, {ID: %q, ExecID: \"port-forward\", Spec: {Args: [%s 127.0.0.1 %d]}, Stdin, Stdout})", short(d.pod), wincatExe, d.port))
	if _, err := shim.Exec(ctx, &taskAPI.ExecProcessRequest{
		ID: d.pod, ExecID: "port-forward", Stdin: fifos.Stdin, Stdout: fifos.Stdout,
		Spec: &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Process", Value: procSpec},
	}); err != nil {
		return err
	}
	d.t.call(`shim.Start(ctx, {ID: pod, ExecID: "port-forward"}); stdin <- "GET / HTTP/1.0\r\n\r\n"; close(stdin); read stdout`)
	if _, err := shim.Start(ctx, &taskAPI.StartRequest{ID: d.pod, ExecID: "port-forward"}); err != nil {
		return err
	}
	if _, err := io.WriteString(stdio.Stdin, "GET / HTTP/1.0\r\nHost: demo\r\n\r\n"); err != nil {
		return err
	}
	stdio.Stdin.Close()
	answer, err := io.ReadAll(stdio.Stdout)
	if err != nil {
		return err
	}
	d.t.output(string(answer))
	wait, err := shim.Wait(ctx, &taskAPI.WaitRequest{ID: d.pod, ExecID: "port-forward"})
	if err != nil {
		return err
	}
	d.t.call(fmt.Sprintf("shim.Wait(ctx, {ID: pod, ExecID: \"port-forward\"}) -> exit status %d; shim.Delete(...)", wait.ExitStatus))
	if _, err := shim.Delete(ctx, &taskAPI.DeleteRequest{ID: d.pod, ExecID: "port-forward"}); err != nil {
		return err
	}
	if !strings.Contains(string(answer), "hello from winproc-testapp") || wait.ExitStatus != 0 {
		return fmt.Errorf("through wincat: exit %d, answer %q", wait.ExitStatus, answer)
	}
	d.t.note("The app logged the request that came through wincat:")
	_, err = d.sh(ctx, "", d.tool("crictl"), "logs", "--tail", "1", d.app)
	return err
}

func (d *demo) stats(ctx context.Context) error {
	d.t.section("Statistics")
	d.t.note("The pod's usage from the shim's sandbox API (SandboxMetrics: runhcs's Windows statistics),")
	d.t.note("and the container's through CRI (`crictl stats`, from the same statistics of its task).")
	ctx = namespaces.WithNamespace(ctx, namespace)
	c, err := d.node.DialShim(ctx, d.app)
	if err != nil {
		return err
	}
	defer c.Close()
	d.t.call(fmt.Sprintf("sandbox.SandboxMetrics(ctx, {SandboxID: %q})", short(d.pod)))
	metrics, err := sandboxAPI.NewTTRPCSandboxClient(c).SandboxMetrics(ctx, &sandboxAPI.SandboxMetricsRequest{SandboxID: d.pod})
	if err != nil {
		return err
	}
	pod, err := windowsStats(metrics.GetMetrics().GetData())
	if err != nil {
		return err
	}
	d.t.output(pod)
	if _, err := d.sh(ctx, "", d.tool("crictl"), "stats", "-o", "yaml", d.app); err != nil {
		return err
	}
	d.t.note("The pod's through CRI: containerd-wincri decodes the shim's Windows statistics as the",
		"Windows build does (docs/test-node.md).")
	out, err := d.sh(ctx, "", d.tool("crictl"), "statsp")
	if err != nil {
		return err
	}
	if !strings.Contains(out, podName) {
		return fmt.Errorf("crictl statsp does not list the pod:\n%s", out)
	}
	d.t.note("The pod as CRI reports it; the \"winproc\" part is the shim's pod settings.")
	if _, err := d.sh(ctx, "", d.tool("crictl"), "pods"); err != nil {
		return err
	}
	_, err = d.sh(ctx, "", d.tool("crictl"), "inspectp", d.pod)
	return err
}

// bootstrapPath is where containerd records the address of the shim serving
// the app container (and so the pod).
func (d *demo) bootstrapPath() string {
	return filepath.Join(d.node.Bundle(d.app), "bootstrap.json")
}

// windowsStats renders runhcs-format statistics.
func windowsStats(data *anypb.Any) (string, error) {
	v, err := typeurl.UnmarshalAny(data)
	if err != nil {
		return "", err
	}
	s, ok := v.(*wstats.Statistics)
	if !ok {
		return "", fmt.Errorf("statistics are %T, want runhcs's Statistics", v)
	}
	w := s.GetWindows()
	p, m, st := w.GetProcessor(), w.GetMemory(), w.GetStorage()
	if p.GetTotalRuntimeNS() == 0 || m.GetMemoryUsagePrivateWorkingSetBytes() == 0 {
		return "", fmt.Errorf("statistics show no usage: %v", w)
	}
	return fmt.Sprintf("cpu total %v (user %v, kernel %v)\nmemory commit %s (peak %s), private working set %s\nstorage read %d ops / %s, written %d ops / %s",
		time.Duration(p.GetTotalRuntimeNS()).Round(time.Millisecond), time.Duration(p.GetRuntimeUserNS()).Round(time.Millisecond), time.Duration(p.GetRuntimeKernelNS()).Round(time.Millisecond),
		mib(m.GetMemoryUsageCommitBytes()), mib(m.GetMemoryUsageCommitPeakBytes()), mib(m.GetMemoryUsagePrivateWorkingSetBytes()),
		st.GetReadCountNormalized(), mib(st.GetReadSizeBytes()), st.GetWriteCountNormalized(), mib(st.GetWriteSizeBytes())), nil
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (d *demo) teardown(ctx context.Context) error {
	d.t.section("Tear down")
	d.t.note("Stop the app: for a Windows process SIGTERM is CTRL_SHUTDOWN_EVENT; Wine can deliver",
		"console events only as SIGINT, so under the emulation the app sees CTRL_C_EVENT, handles it",
		"and exits 0.")
	if _, err := d.sh(ctx, "", d.tool("crictl"), "stop", "-t", "10", d.app); err != nil {
		return err
	}
	out, err := d.quiet(ctx, d.tool("crictl"), "inspect", "-o", "go-template", "--template", "{{.status.state}} {{.status.exitCode}}", d.app)
	if err != nil {
		return err
	}
	d.t.command(`crictl inspect -o go-template --template "{{.status.state}} {{.status.exitCode}}" ` + short(d.app))
	d.t.output(out)
	if strings.TrimSpace(out) != "CONTAINER_EXITED 0" {
		return fmt.Errorf("after crictl stop the app is %q, want CONTAINER_EXITED 0", strings.TrimSpace(out))
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "logs", "--tail", "1", d.app); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("crictl"), "rm", d.app); err != nil {
		return err
	}
	for _, args := range [][]string{{"stopp", d.pod}, {"rmp", d.pod}, {"pods"}} {
		if _, err := d.sh(ctx, "", append([]string{d.tool("crictl")}, args...)...); err != nil {
			return err
		}
	}
	// The pod's shim exits just after answering its removal.
	left := d.node.Processes()
	for deadline := time.Now().Add(10 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = d.node.Processes() {
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		return fmt.Errorf("after rmp these processes of the pod still run: %v", left)
	}

	d.t.note("Stop containerd and the snapshotter as a service manager would (SIGTERM).")
	for _, dm := range []*emulatednode.Daemon{d.containerd, d.snapshotter} {
		d.t.command(fmt.Sprintf("kill %d   # %s", dm.Cmd.Process.Pid, dm.Name))
		if err := dm.Stop(daemonStopGrace); err != nil {
			return err
		}
	}
	mounts := emulatednode.Mounts(d.dir)
	d.t.command("grep -c " + d.dir + " /proc/mounts")
	d.t.output(fmt.Sprint(len(mounts)))
	if len(mounts) > 0 {
		return fmt.Errorf("mounts left behind: %v", mounts)
	}
	dir := d.dir
	d.t.command("cd / && rm -rf " + dir)
	d.t.dir = ""
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return nil
}

// cleanup undoes whatever the steps left, last first, after a failure or
// an interrupt as after success; it reports what it had to force.
func (d *demo) cleanup(failed, interrupted bool) error {
	if d.dir == "" {
		return nil
	}
	if failed && !interrupted {
		for _, log := range []string{"containerd.log", "snapshotter.log"} {
			if tail := d.logTail(log, 30); tail != "" {
				fmt.Fprintf(d.cfg.Out, "\n--- last lines of %s ---\n%s\n", log, tail)
			}
		}
	}
	if failed {
		fmt.Fprintf(d.cfg.Out, "\ncleaning up %s\n", d.dir)
	}
	// Graceful first, while containerd runs.
	if d.containerd != nil && d.containerd.Alive() {
		for i := len(d.cleanups) - 1; i >= 0; i-- {
			d.cleanups[i]()
		}
	}
	var errs []error
	for _, dm := range []*emulatednode.Daemon{d.containerd, d.snapshotter} {
		if err := dm.Stop(daemonStopGrace); err != nil {
			errs = append(errs, err)
		}
	}
	// Then by force: shims and Wine processes of this node, mounts below
	// its directory, the directory.
	if d.node == nil {
		return errors.Join(append(errs, os.RemoveAll(d.dir))...)
	}
	killed, err := d.node.Clean()
	if len(killed) > 0 {
		errs = append(errs, fmt.Errorf("killed processes left behind: %v", killed))
	}
	errs = append(errs, err)
	if failed {
		// What the failure itself caused is reported by the step's error.
		return nil
	}
	return errors.Join(errs...)
}

func (d *demo) tool(name string) string { return filepath.Join(d.cfg.Tools, name) }

// sh runs argv in the demo directory with the shown environment and shows
// it and its output (display, or argv rendered). A failure returns the
// output as well.
func (d *demo) sh(ctx context.Context, display string, argv ...string) (string, error) {
	if display == "" {
		display = d.t.shellLine(argv)
	}
	d.t.command(display)
	out, err := d.quiet(ctx, argv...)
	shown := dropNoise(out)
	if shown != out && !d.noiseNoted {
		d.noiseNoted = true
		d.t.note("(ctr warns on every command that this host uses cgroup v1, a property of the machine,",
			"not of winproc: the transcript leaves that line out)")
	}
	d.t.output(shown)
	if err != nil {
		return out, fmt.Errorf("%s: %w", display, err)
	}
	return out, nil
}

// dropNoise removes ctr's cgroup v1 deprecation warning from out, and the
// clear-screen sequence crictl's stats tables start with.
func dropNoise(out string) string {
	out = strings.ReplaceAll(out, "\x1b[2J\x1b[H", "")
	lines := strings.SplitAfter(out, "\n")
	kept := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, "DEPRECATION: The support for cgroup v1 is deprecated") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

// quiet runs argv like sh without showing it.
func (d *demo) quiet(ctx context.Context, argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = d.dir
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// short is a pod ID as crictl shows it.
func short(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
