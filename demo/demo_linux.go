//go:build linux

package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/winproc/winproc/integration/emulatednode"
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
