package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/winproc/winproc/containerdconfig"
)

// ---- config ----

func (d *run) checkConfig() {
	r := Result{Name: CheckConfig}
	if d.cfgErr != nil {
		r.Status = Fail
		r.Summary = fmt.Sprintf("cannot read containerd's config: %v", d.cfgErr)
		if errors.Is(d.cfgErr, fs.ErrNotExist) {
			r.Fix = []string{
				fmt.Sprintf("pass --config with the file containerd runs with (containerd --config FILE), or write containerd's config to %s;", d.o.ConfigPath),
				"package containerdconfig generates the whole config for winproc (handler, proxy plugins, unpack rule)",
			}
		} else {
			r.Fix = []string{fmt.Sprintf("correct %s: containerd refuses a config it cannot parse", d.o.ConfigPath)}
		}
		d.add(r)
		return
	}
	c := d.cfg
	r.Status = OK
	r.Summary = fmt.Sprintf("%s, version %d", c.Path, c.Version)
	if len(c.Files) > 1 {
		r.Details = append(r.Details, "imports: "+strings.Join(c.Files[1:], ", "))
	}
	switch {
	case c.Version <= 1:
		r.Status = Warn
		r.Details = append(r.Details, "version 1 configs are read by migrating them; containerd 2.x may drop that")
		r.Fix = []string{fmt.Sprintf("containerd config migrate > NEW.toml, review it, and replace %s with it", c.Path)}
	case c.Version == 2:
		r.Details = append(r.Details, "version 2 (containerd 1.7); containerd 2.x migrates it when it loads it")
	case c.Version > 4:
		r.Status = Warn
		r.Details = append(r.Details, fmt.Sprintf("version %d is newer than the versions this doctor knows (2 to 4); findings may be wrong", c.Version))
	}
	d.add(r)
}

// ---- handler ----

func (d *run) checkHandler() {
	if d.cfg == nil {
		d.add(skipped(CheckHandler, "containerd's config could not be read"))
		return
	}
	c, h := d.cfg, d.o.Handler
	table := c.RuntimeTable(h)
	r := Result{Name: CheckHandler, Status: OK}
	if d.rt == nil {
		r.Status = Fail
		r.Summary = fmt.Sprintf("runtime handler %q is not registered in %s", h, c.Path)
		if names := c.runtimeNames(); len(names) > 0 {
			r.Details = append(r.Details, "registered handlers: "+strings.Join(names, ", "))
		} else {
			r.Details = append(r.Details, "the config registers no runtime handlers")
		}
		r.Fix = append([]string{fmt.Sprintf("add the handler table to %s (package containerdconfig generates it), then %s:", c.Path, d.restartHint())},
			handlerFragment(c.Version, h, d.goos)...)
		d.add(r)
		return
	}
	rt := d.rt
	var problems []issue
	if origin := c.Origin(pluginCRIRun); len(c.Files) > 1 && origin != "" {
		r.Details = append(r.Details, "from "+origin)
	}

	// runtime_type: the type, or a path to the binary.
	switch {
	case rt.RuntimeType == runtimeType:
	case rt.RuntimeType != "" && strings.TrimSuffix(path.Base(filepath.ToSlash(rt.RuntimeType)), ".exe") == shimBaseName:
		r.Details = append(r.Details, fmt.Sprintf("runtime_type names the shim binary %s", rt.RuntimeType))
	default:
		problems = append(problems, issue{Fail, fmt.Sprintf("[%s] has runtime_type = %q; winproc's is %q", table, rt.RuntimeType, runtimeType),
			[]string{fmt.Sprintf(`set runtime_type = %q in [%s], then %s`, runtimeType, table, d.restartHint())}})
	}
	if rt.RuntimePath != "" {
		r.Details = append(r.Details, "runtime_path "+rt.RuntimePath)
	}

	sandboxer, sbNote := rt.Sandboxer, ""
	if sandboxer == "" {
		sandboxer, sbNote = "podsandbox", " (containerd's default)"
	}
	sbKey := "sandboxer"
	if c.Version <= 2 {
		sbKey = "sandbox_mode"
	}
	problems = append(problems, d.sandboxerIssues(table, sbKey, sandboxer)...)

	snap, snNote := d.snapshotter()
	if snap != snapshotterName {
		problems = append(problems, issue{Fail, fmt.Sprintf("the handler's images go to snapshotter %q%s; winproc's shim mounts windowsfilter snapshots", snap, snNote),
			[]string{fmt.Sprintf(`set snapshotter = %q in [%s], then %s`, snapshotterName, table, d.restartHint())}})
	}

	pauseNote := "pause_image " + d.shimOpts.PauseImage
	if d.shimOptsErr != nil {
		problems = append(problems, issue{Fail, fmt.Sprintf("the shim refuses the handler's options: %v", d.shimOptsErr),
			[]string{fmt.Sprintf("correct or remove the key in [%s.options] (known: pause_image, wine_template_prefix, host_build), then %s", table, d.restartHint())}})
	} else {
		if asString(d.rt.Options["pause_image"]) == "" {
			pauseNote += " (default)"
		}
		if d.shimOpts.HostBuild != "" {
			pauseNote += ", host_build " + d.shimOpts.HostBuild
		}
	}

	// CRI's per-handler pull platform (containerd 2.x).
	if c.Version >= 3 {
		imgTable := fmt.Sprintf(`plugins.'%s'.runtime_platforms.%s`, pluginCRIImages, tomlKey(h))
		fix := []string{fmt.Sprintf("add to %s, then %s:", c.Path, d.restartHint()),
			"[" + imgTable + "]",
			fmt.Sprintf(`  platform = %q`, layerPlatform),
			fmt.Sprintf(`  snapshotter = %q`, snapshotterName)}
		rp, ok := c.RuntimePlatforms[h]
		switch {
		case !ok:
			problems = append(problems, issue{Warn, fmt.Sprintf("no [%s]: CRI pulls the handler's images for containerd's own platform, into its default snapshotter", imgTable), fix})
		case !isWindowsAMD64(rp.Platform) || rp.Snapshotter != snapshotterName:
			problems = append(problems, issue{Fail, fmt.Sprintf("[%s] pulls %s images into snapshotter %q; winproc needs %s into %s", imgTable, orNone(rp.Platform), rp.Snapshotter, layerPlatform, snapshotterName), fix[1:]})
		}
	}

	r.Summary = fmt.Sprintf("%s: runtime_type %s, sandboxer %s%s, snapshotter %s%s", h, rt.RuntimeType, sandboxer, sbNote, snap, snNote)
	if sandboxer == "shim" {
		r.Details = append(r.Details, pauseNote)
	} else if d.shimOpts.HostBuild != "" {
		r.Details = append(r.Details, "host_build "+d.shimOpts.HostBuild)
	}
	applyIssues(&r, problems)
	d.add(r)
}

// sandboxerIssues are the problems of the handler's sandboxer: one
// containerd does not know, or shim mode on Windows, whose CRI
// (sandbox_stats_windows.go getSandboxPidCount) loads a container record
// of the sandbox, which shim mode does not make.
func (d *run) sandboxerIssues(table, sbKey, sandboxer string) []issue {
	switch {
	case sandboxer != "shim" && sandboxer != "podsandbox":
		return []issue{{Fail, fmt.Sprintf("[%s] has %s = %q; use \"shim\" or \"podsandbox\"", table, sbKey, sandboxer),
			[]string{fmt.Sprintf(`set %s = %q in [%s], then %s`, sbKey, defaultSandboxer(d.goos), table, d.restartHint())}}}
	case sandboxer == "shim" && d.goos == "windows":
		return []issue{{Warn, "sandboxer shim hides this handler's pods from the kubelet's pod stats: containerd's Windows CRI leaves them out of ListPodSandboxStats and fails PodSandboxStats (the kubelet's PodAndContainerStatsFromCRI, beta from 1.37, and its check before lowering a memory limit in place)",
			[]string{fmt.Sprintf(`set %s = "podsandbox" in [%s], with the pause image as [plugins.'%s'.pinned_images] sandbox, then %s (docs/cri-sandbox-modes.md)`, sbKey, table, pluginCRIImages, d.restartHint())}}}
	}
	return nil
}

// snapshotter is the handler's effective snapshotter and where it comes
// from.
func (d *run) snapshotter() (string, string) {
	if d.rt != nil && d.rt.Snapshotter != "" {
		return d.rt.Snapshotter, ""
	}
	if d.cfg != nil && d.cfg.Snapshotter != "" {
		return d.cfg.Snapshotter, " (CRI's default)"
	}
	if d.goos == "windows" {
		return "windows", " (containerd's default)"
	}
	return "overlayfs", " (containerd's default)"
}

// shimBaseName is the shim binary's name without ".exe".
var shimBaseName = "containerd-shim-" + shimNameOf(runtimeType)

// shimNameOf returns "winproc-v2" for io.containerd.winproc.v2, as
// containerd names shim binaries.
func shimNameOf(rt string) string {
	parts := strings.Split(rt, ".")
	if len(parts) < 2 {
		return rt
	}
	return parts[len(parts)-2] + "-" + parts[len(parts)-1]
}

func (d *run) shimBinary() string {
	if d.goos == "windows" {
		return shimBaseName + ".exe"
	}
	return shimBaseName
}

// defaultSandboxer is the sandboxer package containerdconfig gives a node
// of goos: podsandbox on Windows, whose CRI reads pod stats from the
// sandbox's container record; shim elsewhere (the emulated node's).
func defaultSandboxer(goos string) string {
	if goos == "windows" {
		return containerdconfig.Windows().Sandboxer
	}
	return "shim"
}

// handlerFragment is the TOML table registering handler in a config of
// version version, as package containerdconfig writes it for a node of
// goos.
func handlerFragment(version int, handler, goos string) []string {
	sandboxer := defaultSandboxer(goos)
	if version <= 2 {
		return []string{
			fmt.Sprintf(`[plugins.%q.containerd.runtimes.%s]`, pluginCRIv2, tomlKey(handler)),
			fmt.Sprintf(`  runtime_type = %q`, runtimeType),
			fmt.Sprintf(`  sandbox_mode = %q`, sandboxer),
			fmt.Sprintf(`  snapshotter = %q`, snapshotterName),
		}
	}
	return []string{
		fmt.Sprintf(`[plugins.'%s'.containerd.runtimes.%s]`, pluginCRIRun, tomlKey(handler)),
		fmt.Sprintf(`  runtime_type = %q`, runtimeType),
		fmt.Sprintf(`  sandboxer = %q`, sandboxer),
		fmt.Sprintf(`  snapshotter = %q`, snapshotterName),
	}
}
