//go:build linux

package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
)

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
