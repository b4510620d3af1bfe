//go:build linux

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	wstats "github.com/Microsoft/hcsshim/cmd/containerd-shim-runhcs-v1/stats"
	sandboxAPI "github.com/containerd/containerd/api/runtime/sandbox/v1"
	taskAPI "github.com/containerd/containerd/api/runtime/task/v3"
	runtimeoptions "github.com/containerd/containerd/api/types/runtimeoptions/v1"
	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/containerd/v2/core/containers"
	"github.com/containerd/containerd/v2/pkg/cio"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/pkg/oci"
	"github.com/containerd/typeurl/v2"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/pelletier/go-toml/v2"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/internal/emulatednode"
	"github.com/winproc/winproc/internal/syncbuffer"
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
	appID     = "demo-app"
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
	client                  *containerd.Client
	pod                     string
	port                    int
	container               containerd.Container
	task                    containerd.Task
	appOut                  *buffer

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
	crictlConfig := filepath.Join(dir, "crictl.yaml")
	d.env = append(os.Environ(),
		"PATH="+path,
		"CONTAINERD_ADDRESS="+filepath.Join(dir, "containerd.sock"),
		"CONTAINERD_NAMESPACE="+namespace,
		"CRI_CONFIG_FILE="+crictlConfig,
	)
	// The stock containerd: the demo still shows where its Linux CRI stops
	// (docs/test-node.md).
	d.node = emulatednode.New(emulatednode.Config{Dir: dir, Tools: d.cfg.Tools, Bin: d.bin, Options: d.options(), HostBuild: hostBuild, Env: d.env, Containerd: emulatednode.StockContainerd})
	crictl := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", d.node.Address, d.node.Address)
	if err := os.WriteFile(crictlConfig, []byte(crictl), 0o644); err != nil {
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
	d.t.output(crictl)
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
	d.t.section("containerd's config, from the project's generator (runtimeclass/containerdconfig)")
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
		"it, and the container would fail only when it starts). This import is expected to fail:")
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
	d.t.note("(failed as expected)", "", "The images this node can run: ctr unpacks their layers through winproc-snapshotter's", "differ into windowsfilter snapshots.")
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
		// Host network: this machine has no CNI.
		"linux": map[string]any{"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}}},
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.dir, "pod.json"), b, 0o644); err != nil {
		return err
	}
	d.t.note(
		"A host-network pod (this machine has no CNI). The runtime handler winproc sends it to",
		"containerd-shim-winproc-v2's sandbox API, which prepares the pause image's rootfs and",
		"starts C:\\pause.exe in the pod's compute system.",
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
	_, err = d.sh(ctx, "", d.tool("crictl"), "pods")
	return err
}

func (d *demo) startContainer(ctx context.Context) error {
	d.t.section("Start the test app in the pod")
	d.t.note(
		"On a Windows node this is `crictl create` and `crictl start`. containerd's CRI built for",
		"Linux, as here, cannot make the spec of a Windows container (its Windows spec options are",
		"stubs off Windows), so this is expected to fail:",
	)
	container := `{"metadata": {"name": "app"}, "image": {"image": "` + appRef + `"}, "command": ["C:\\winproc-testapp.exe", "serve"], "log_path": "app.log"}`
	if err := os.WriteFile(filepath.Join(d.dir, "container.json"), []byte(container+"\n"), 0o644); err != nil {
		return err
	}
	d.t.command("cat container.json")
	d.t.output(container)
	out, err := d.sh(ctx, "", d.tool("crictl"), "create", d.pod, filepath.Join(d.dir, "container.json"), filepath.Join(d.dir, "pod.json"))
	const want = "failed to generate spec: not implemented"
	if err == nil || !strings.Contains(out, want) {
		return fmt.Errorf("crictl create: want the failure %q from containerd's Linux CRI, got %v", want, err)
	}
	d.t.note("(failed as expected) So the container is made as containerd's CRI on Windows makes it,",
		"through the containerd Go client: a windows/amd64 OCI spec, the windowsfilter snapshotter,",
		"the winproc runtime, and the pod as its sandbox. The task joins the pod's shim.")
	client, err := containerd.New(d.node.Address, containerd.WithDefaultNamespace(namespace))
	if err != nil {
		return err
	}
	d.client = client
	image, err := client.GetImage(ctx, appRef)
	if err != nil {
		return err
	}
	if d.port, err = freePort(); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", d.port)
	spec, err := oci.GenerateSpecWithPlatform(ctx, client, "windows/amd64", &containers.Container{ID: appID},
		oci.WithProcessArgs(testApp, "serve", "-addr", addr),
		oci.WithEnv([]string{"GREETING=hello from the winproc demo"}),
		oci.WithAnnotations(map[string]string{
			"io.kubernetes.cri.container-type": "container",
			"io.kubernetes.cri.sandbox-id":     d.pod,
		}))
	if err != nil {
		return err
	}
	body, err := toml.Marshal(d.options())
	if err != nil {
		return err
	}
	d.t.call(fmt.Sprintf("client.NewContainer(ctx, %q, WithImage(%q), WithSnapshotter(%q), WithNewSnapshot(...),", appID, appRef, containerdnames.Snapshotter))
	d.t.call(fmt.Sprintf("    WithRuntime(%q, handler options), WithSandbox(%q),", containerdnames.RuntimeType, short(d.pod)))
	d.t.call(fmt.Sprintf("    WithSpec(windows/amd64: args [%s serve -addr %s], env GREETING=...))", testApp, addr))
	c, err := client.NewContainer(ctx, appID,
		containerd.WithImage(image),
		containerd.WithSnapshotter(containerdnames.Snapshotter),
		containerd.WithNewSnapshot(appID, image),
		containerd.WithRuntime(containerdnames.RuntimeType, &runtimeoptions.Options{ConfigBody: body}),
		containerd.WithSandbox(d.pod),
		containerd.WithSpec(spec))
	if err != nil {
		return err
	}
	d.container = c
	d.cleanups = append(d.cleanups, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if task, err := c.Task(ctx, nil); err == nil {
			task.Kill(ctx, syscall.SIGKILL)
			task.Delete(ctx, containerd.WithProcessKill)
		}
		c.Delete(ctx, containerd.WithSnapshotCleanup)
	})
	d.appOut = &buffer{}
	d.t.call("task := container.NewTask(ctx, stdout and stderr to the demo); task.Start(ctx)")
	task, err := c.NewTask(ctx, cio.NewCreator(cio.WithStreams(nil, d.appOut, d.appOut), cio.WithFIFODir(filepath.Join(d.dir, "fifo"))))
	if err != nil {
		return err
	}
	d.task = task
	if err := task.Start(ctx); err != nil {
		return err
	}
	if err := d.appOut.waitFor(ctx, "listening on", time.Minute); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("ctr"), "containers", "ls"); err != nil {
		return err
	}
	if _, err := d.sh(ctx, "", d.tool("ctr"), "tasks", "ls"); err != nil {
		return err
	}
	ps, err := d.sh(ctx, "", d.tool("ctr"), "tasks", "ps", appID)
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
	d.t.note("The app's stdout (what `crictl logs` shows on a Windows node):")
	d.t.output(d.appOut.String())
	return nil
}

func (d *demo) exec(ctx context.Context) error {
	d.t.section("Exec into the container")
	d.t.note("What `crictl exec` does on a Windows node: an exec in the container's compute system.")
	spec, err := d.task.Spec(ctx)
	if err != nil {
		return err
	}
	p := *spec.Process
	p.Args = []string{testApp, "env"}
	d.t.call(fmt.Sprintf("task.Exec(ctx, \"env\", {Args: [%s env]}, stdout to the demo); Start; Wait", testApp))
	out := &buffer{}
	proc, err := d.task.Exec(ctx, "env", &p, cio.NewCreator(cio.WithStreams(nil, out, out), cio.WithFIFODir(filepath.Join(d.dir, "fifo"))))
	if err != nil {
		return err
	}
	done, err := proc.Wait(ctx)
	if err != nil {
		return err
	}
	if err := proc.Start(ctx); err != nil {
		return err
	}
	var st containerd.ExitStatus
	select {
	case st = <-done:
	case <-time.After(time.Minute):
		return errors.New("the exec did not exit within a minute")
	}
	// The streams are drained once the process's IO is closed.
	proc.IO().Wait()
	if _, err := proc.Delete(ctx); err != nil {
		return err
	}
	d.t.output(out.String())
	d.t.output(fmt.Sprintf("(exit status %d)", st.ExitCode()))
	if st.ExitCode() != 0 || !strings.Contains(out.String(), "GREETING=hello from the winproc demo") {
		return fmt.Errorf("exec of env: exit %d, output without the container's environment", st.ExitCode())
	}
	return nil
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
	shimConn, err := d.node.DialShim(ctx, appID)
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
	d.t.output(d.appOut.String())
	return nil
}

func (d *demo) stats(ctx context.Context) error {
	d.t.section("Statistics")
	d.t.note("The pod's usage from the shim's sandbox API (SandboxMetrics: runhcs's Windows statistics),")
	d.t.note("and the container's from the task API (what `crictl stats` reads on a Windows node).")
	ctx = namespaces.WithNamespace(ctx, namespace)
	c, err := d.node.DialShim(ctx, appID)
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
	d.t.call("task.Metrics(ctx)")
	m, err := d.task.Metrics(ctx)
	if err != nil {
		return err
	}
	app, err := windowsStats(m.Data)
	if err != nil {
		return err
	}
	d.t.output(app)
	d.t.note("containerd's CRI built for Linux decodes pod statistics as cgroup metrics, not the Windows",
		"statistics the shim reports, so `crictl statsp` is expected to fail here (containerd's",
		"Windows CRI decodes Windows statistics; that has not been run):")
	out, err := d.sh(ctx, "", d.tool("crictl"), "statsp")
	const want = "unexpected sandbox metric type *stats.Statistics"
	if err == nil || !strings.Contains(out, want) {
		return fmt.Errorf("crictl statsp: want the failure %q from containerd's Linux CRI, got %v", want, err)
	}
	d.t.note("(failed as expected) The pod as CRI reports it; the \"winproc\" part is the shim's pod settings.")
	if _, err := d.sh(ctx, "", d.tool("crictl"), "pods"); err != nil {
		return err
	}
	_, err = d.sh(ctx, "", d.tool("crictl"), "inspectp", d.pod)
	return err
}

// bootstrapPath is where containerd records the address of the shim serving
// the app container (and so the pod).
func (d *demo) bootstrapPath() string {
	return filepath.Join(d.node.Bundle(appID), "bootstrap.json")
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
		"console events only as SIGINT, so under the emulation the app sees CTRL_C_EVENT.")
	done, err := d.task.Wait(ctx)
	if err != nil {
		return err
	}
	d.t.call("task.Kill(ctx, SIGTERM); task.Wait(ctx)")
	if err := d.task.Kill(ctx, syscall.SIGTERM); err != nil {
		return err
	}
	var st containerd.ExitStatus
	select {
	case st = <-done:
	case <-time.After(time.Minute):
		return errors.New("the app did not exit within a minute of SIGTERM")
	}
	d.task.IO().Wait()
	d.t.output(lastLine(d.appOut.String()))
	d.t.output(fmt.Sprintf("(exit status %d)", st.ExitCode()))
	d.t.call("task.Delete(ctx); container.Delete(ctx, WithSnapshotCleanup)")
	if _, err := d.task.Delete(ctx); err != nil {
		return err
	}
	if err := d.container.Delete(ctx, containerd.WithSnapshotCleanup); err != nil {
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
	d.client.Close()
	d.client = nil

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
	if d.client != nil {
		d.client.Close()
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

// dropNoise removes ctr's cgroup v1 deprecation warning from out.
func dropNoise(out string) string {
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

// buffer collects a process's output while it writes it.
type buffer struct{ syncbuffer.Buffer }

// waitFor waits until the output holds want.
func (b *buffer) waitFor(ctx context.Context, want string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the output never showed %q; it is:\n%s", want, b.String())
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
