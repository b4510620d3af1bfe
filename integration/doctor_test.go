//go:build linux

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/doctor"
	"github.com/winproc/winproc/integration/node"
	"github.com/winproc/winproc/runtimeclass"
	"github.com/winproc/winproc/winimage"
)

// doctorOptions are the options an operator of the emulated node passes.
func doctorOptions(n *node.Node) doctor.Options {
	return doctor.Options{ConfigPath: n.ConfigPath, Address: n.Address, HostBuild: node.HostBuild, Timeout: 30 * time.Second}
}

// runDoctor runs the doctor in-process and logs its report.
func runDoctor(t *testing.T, o doctor.Options) *doctor.Report {
	t.Helper()
	r := doctor.Run(context.Background(), o)
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("winproc doctor:\n%s", text.String())
	return r
}

// requireCheck asserts a check's status and that its summary and fix hold
// the given texts.
func requireCheck(t *testing.T, r *doctor.Report, name string, status doctor.Status, summary string, fixes ...string) {
	t.Helper()
	c := r.Check(name)
	if c == nil {
		t.Fatalf("no %s check", name)
	}
	if c.Status != status || !strings.Contains(c.Summary, summary) {
		t.Errorf("%s: %s %q\nwant %s with %q", name, c.Status, c.Summary, status, summary)
	}
	fix := strings.Join(c.Fix, "\n")
	for _, f := range fixes {
		if !strings.Contains(fix, f) {
			t.Errorf("%s: fix\n%s\nlacks %q", name, fix, f)
		}
	}
}

// noWincatImage builds an image under ref whose only layer above the base
// holds pause.exe (the entrypoint) but no wincat.exe, and returns its
// archive.
func noWincatImage(t *testing.T, ref string) string {
	return imageArchive(t, ref, node.HostBuild+".1", winimage.PauseEntrypoint, map[string][]byte{"pause.exe": winBin(t, "pause.exe")})
}

// The doctor passes on the emulated node once its pause image is imported,
// and fails, saying how to fix it, when the pause image is missing, built
// for another Windows build or lacks wincat.exe, and when the handler is
// not registered. One node serves every case: each import replaces the
// image record of node.PauseImage.
func TestDoctor(t *testing.T) {
	n := node.Start(t, bins)
	// The doctor finds the shim as containerd does: on PATH.
	t.Setenv("PATH", bins+string(os.PathListSeparator)+os.Getenv("PATH"))
	rcFile := filepath.Join(t.TempDir(), "runtimeclass.yaml")
	manifests, err := runtimeclass.Manifests()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rcFile, manifests["winproc-ltsc2022.yaml"], 0o644); err != nil {
		t.Fatal(err)
	}
	importFix := "ctr -a " + n.Address + " -n k8s.io images import --platform windows/amd64 --snapshotter windowsfilter pause.tar"
	buildFix := "winproc image pause -pause-exe pause.exe -wincat-exe wincat.exe -os-version " + node.HostBuild + ".1 -ref " + node.PauseImage + " -output pause.tar"

	t.Run("no pause image", func(t *testing.T) {
		r := runDoctor(t, doctorOptions(n))
		requireCheck(t, r, doctor.CheckPauseImage, doctor.Fail, `pause image "`+node.PauseImage+`" is not in containerd (namespace k8s.io)`, buildFix, importFix)
		if len(r.Failed()) != 1 || r.OK {
			t.Errorf("want only the pause image check to fail, got %d failures", len(r.Failed()))
		}
	})

	importPauseImage(t, n, node.HostBuild+".1", false)

	t.Run("passes", func(t *testing.T) { doctorPasses(t, n, rcFile) })

	t.Run("the command", func(t *testing.T) { doctorCommand(t, n, rcFile) })

	t.Run("handler not registered", func(t *testing.T) {
		o := doctorOptions(n)
		o.Handler = "nothere"
		r := runDoctor(t, o)
		requireCheck(t, r, doctor.CheckHandler, doctor.Fail, `runtime handler "nothere" is not registered in `+n.ConfigPath,
			"add the handler table to "+n.ConfigPath,
			"[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.nothere]\n"+
				`  runtime_type = "io.containerd.winproc.v2"`+"\n"+
				`  sandboxer = "shim"`+"\n"+
				`  snapshotter = "windowsfilter"`)
		requireCheck(t, r, doctor.CheckPauseImage, doctor.Warn, `not checked: the handler "nothere" is not registered`)
		if len(r.Failed()) != 1 || r.OK {
			t.Errorf("want only the handler check to fail, got %d failures", len(r.Failed()))
		}
	})

	t.Run("pause image for another build", func(t *testing.T) {
		// The snapshotter refuses to unpack it; an operator can still
		// import it without unpacking.
		importImage(t, n, pauseImage(t, node.PauseImage, "10.0.17763.1"), false)
		r := runDoctor(t, doctorOptions(n))
		requireCheck(t, r, doctor.CheckPauseImage, doctor.Fail,
			`image "`+node.PauseImage+`" is built for 10.0.17763 (ltsc2019); this host is 10.0.20348 (ltsc2022); process isolation needs an image for 10.0.20348 (ltsc2022)`,
			"build a pause image for this node's build 10.0.20348 (ltsc2022): "+buildFix, importFix,
			"or set pause_image in [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.winproc.options] to an image built for 10.0.20348 (ltsc2022)")
		if len(r.Failed()) != 1 {
			t.Errorf("want only the pause image check to fail, got %d failures", len(r.Failed()))
		}
	})

	t.Run("pause image without wincat", func(t *testing.T) {
		importImage(t, n, noWincatImage(t, node.PauseImage), true)
		r := runDoctor(t, doctorOptions(n))
		requireCheck(t, r, doctor.CheckPauseImage, doctor.Fail,
			`pause image "`+node.PauseImage+`" lacks C:\Windows\System32\wincat.exe (port-forward runs it)`, buildFix, importFix)
		if c := r.Check(doctor.CheckPauseImage); len(c.Details) == 0 || !strings.Contains(strings.Join(c.Details, "\n"), `has C:\pause.exe`) {
			t.Errorf("the details do not say pause.exe was found: %q", c.Details)
		}
		if len(r.Failed()) != 1 {
			t.Errorf("want only the pause image check to fail, got %d failures", len(r.Failed()))
		}
	})

	if err := n.RemoveImages(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// doctorPasses checks that every check of a node set up as the project says
// passes.
func doctorPasses(t *testing.T, n *node.Node, rcFile string) {
	o := doctorOptions(n)
	o.RuntimeClasses = []string{rcFile}
	r := runDoctor(t, o)
	for _, c := range r.Checks {
		if c.Status != doctor.OK {
			t.Errorf("%s: %s %q (fix %q)", c.Name, c.Status, c.Summary, c.Fix)
		}
	}
	if !r.OK || len(r.Checks) != 15 {
		t.Errorf("report OK %v with %d checks, want OK with 15", r.OK, len(r.Checks))
	}
	requireCheck(t, r, doctor.CheckShim, doctor.OK, filepath.Join(bins, "containerd-shim-winproc-v2")+" (on PATH) answers -info: io.containerd.winproc.v2")
	requireCheck(t, r, doctor.CheckPauseImage, doctor.OK, node.PauseImage+`: windows/amd64 `+node.HostBuild+`.1, snapshotter windowsfilter, has C:\pause.exe and C:\Windows\System32\wincat.exe`)
	requireCheck(t, r, doctor.CheckPlugins, doctor.OK, "io.containerd.snapshotter.v1 windowsfilter (windows/amd64)")
	requireCheck(t, r, doctor.CheckStateDirs, doctor.OK, "administrators only: ")
	requireCheck(t, r, doctor.CheckOrphans, doctor.OK, "none under "+filepath.Dir(filepath.Dir(n.EmulationRoot())))
	requireCheck(t, r, doctor.CheckTerminations, doctor.OK, "none")
	requireCheck(t, r, doctor.CheckShutdown, doctor.OK, "not checked: this node has no Windows service manager (the emulation); containerd and the snapshotter are not services")
	requireCheck(t, r, doctor.CheckContainerd, doctor.OK, "containerd 2.4.2")
	requireCheck(t, r, doctor.CheckRuntimeClass, doctor.OK, "RuntimeClass winproc-ltsc2022 (handler winproc) selects 10.0.20348 (ltsc2022)")
}

// doctorCommand runs the built winproc doctor: exit status, text and JSON,
// the shim by -shim with nothing of ours on PATH.
func doctorCommand(t *testing.T, n *node.Node, rcFile string) {
	dir := t.TempDir()
	if err := node.BuildBinaries(dir, "linux", "winproc"); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		cmd := exec.Command(filepath.Join(dir, "winproc"), append([]string{"doctor", "-config", n.ConfigPath, "-address", n.Address, "-host-build", node.HostBuild,
			"-shim", filepath.Join(bins, "containerd-shim-winproc-v2")}, args...)...)
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &exit):
			t.Logf("stderr: %s", stderr.String())
			return string(out), exit.ExitCode()
		}
		t.Fatalf("winproc doctor: %v\n%s", err, stderr.String())
		return "", 0
	}
	out, code := run("-runtimeclass", rcFile)
	t.Logf("winproc doctor:\n%s", out)
	if code != 0 || !strings.Contains(out, "OK    pause image") || !strings.Contains(out, "15 checks: 0 failed, 0 warnings") {
		t.Errorf("exit %d, want 0 and every check OK", code)
	}
	out, code = run("-json", "-handler", "nothere")
	var r doctor.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-json output: %v\n%s", err, out)
	}
	if code != 1 || r.OK || r.Check(doctor.CheckHandler).Status != doctor.Fail {
		t.Errorf("-handler nothere: exit %d, report %+v; want exit 1 and a failed handler check", code, r)
	}
}
