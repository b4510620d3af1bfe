package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containerd/platforms"

	"github.com/winproc/winproc/containerdconfig"
	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// run is one doctor run: the options, what earlier checks learnt, the
// report.
type run struct {
	o       Options
	sys     System
	goos    string
	timeout time.Duration
	report  Report

	cfg    *Config // nil if it could not be read
	cfgErr error
	// rt is the handler's runtime, nil if the config has none.
	rt *Runtime
	// shimOpts are the handler's options as the shim reads them.
	shimOpts    options.Options
	shimOptsErr error

	host       winbuild.Version
	hostSource string
	hostErr    error

	address string
	cd      Containerd
	cdErr   error
	// cdUp is set by the containerd check.
	cdUp bool
}

func newRun(o Options) *run {
	d := &run{o: o, sys: o.System}
	if d.sys == nil {
		d.sys = Local()
	}
	d.goos = d.sys.GOOS()
	d.timeout = o.Timeout
	if d.timeout <= 0 {
		d.timeout = 10 * time.Second
	}
	if d.o.Handler == "" {
		d.o.Handler = DefaultHandler
	}
	if d.o.Namespace == "" {
		d.o.Namespace = DefaultNamespace
	}
	if d.o.ConfigPath == "" {
		d.o.ConfigPath = defaultConfigPathFor(d.goos, d.sys.Getenv)
	}
	d.cfg, d.cfgErr = LoadConfig(d.sys, d.o.ConfigPath)
	if d.cfgErr != nil {
		d.cfg = nil
	}
	if d.cfg != nil {
		if rt, ok := d.cfg.Runtimes[d.o.Handler]; ok {
			d.rt = &rt
		}
	}
	if d.rt != nil {
		d.shimOpts, d.shimOptsErr = d.rt.ShimOptions()
	} else {
		d.shimOpts, _ = options.Decode(nil)
	}
	d.resolveHost()

	d.address = o.Address
	if d.address == "" && d.cfg != nil {
		d.address = d.cfg.GRPCAddress
	}
	if d.address == "" {
		d.address = defaultAddress(d.goos)
	}
	d.cd, d.cdErr = d.sys.Containerd(d.address)

	d.report = Report{Handler: d.o.Handler, Config: d.o.ConfigPath, Address: d.address}
	if d.hostErr == nil {
		d.report.HostBuild = describeBuild(d.host) + ", from " + d.hostSource
	} else {
		d.report.HostBuild = "unknown"
	}
	return d
}

func (d *run) close() {
	if d.cd != nil {
		d.cd.Close()
	}
}

// resolveHost decides the host build: the option, else the host's own (on
// Windows), else the handler's host_build option (the emulation), else the
// emulation's default.
func (d *run) resolveHost() {
	switch {
	case d.o.HostBuild != "":
		d.host, d.hostErr = winbuild.Parse(d.o.HostBuild)
		d.hostSource = "--host-build"
		if d.hostErr != nil {
			d.hostErr = fmt.Errorf("--host-build: %w", d.hostErr)
		}
		return
	}
	if v, err := d.sys.HostBuild(); err == nil {
		d.host, d.hostSource = v, "this host"
		return
	}
	if d.shimOptsErr == nil && d.shimOpts.HostBuild != "" {
		d.host, d.hostErr = winbuild.Parse(d.shimOpts.HostBuild)
		d.hostSource = "the handler's host_build option"
		if d.hostErr != nil {
			d.hostErr = fmt.Errorf("the handler's host_build option: %w", d.hostErr)
		}
		return
	}
	d.host, d.hostErr = winbuild.Parse(DefaultEmulatedHostBuild)
	d.hostSource = "the emulation's default"
}

func describeBuild(v winbuild.Version) string {
	if v.Major == 10 && v.Minor == 0 {
		if r := winbuild.Release(v.Build); r != "" {
			return v.Label() + " (" + r + ")"
		}
	}
	return v.Label()
}

func defaultConfigPathFor(goos string, getenv func(string) string) string {
	if goos == "windows" {
		pf := getenv("ProgramFiles")
		if pf == "" {
			pf = `C:\Program Files`
		}
		return pf + `\containerd\config.toml`
	}
	return "/etc/containerd/config.toml"
}

func defaultAddress(goos string) string {
	if goos == "windows" {
		return `\\.\pipe\containerd-containerd`
	}
	return "/run/containerd/containerd.sock"
}

// add appends a result.
func (d *run) add(r Result) { d.report.Checks = append(d.report.Checks, r) }

// skipped is a check that could not run because an earlier one failed.
func skipped(name, why string) Result {
	return Result{Name: name, Status: Warn, Summary: "not checked: " + why}
}

func (d *run) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, d.timeout)
}

// restartHint is how to restart containerd on the node.
func (d *run) restartHint() string {
	if d.goos == "windows" {
		return "Restart-Service containerd"
	}
	return "systemctl restart containerd"
}

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
			handlerFragment(c.Version, h)...)
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
	if sandboxer != "shim" && sandboxer != "podsandbox" {
		problems = append(problems, issue{Fail, fmt.Sprintf("[%s] has %s = %q; use \"shim\" or \"podsandbox\"", table, sbKey, sandboxer),
			[]string{fmt.Sprintf(`set %s = "shim" in [%s], then %s`, sbKey, table, d.restartHint())}})
	}

	snap, snNote := d.snapshotter()
	if snap != snapshotterName {
		problems = append(problems, issue{Fail, fmt.Sprintf("the handler's images go to snapshotter %q%s; winproc's shim mounts windowsfilter snapshots", snap, snNote),
			[]string{fmt.Sprintf(`set snapshotter = %q in [%s], then %s`, snapshotterName, table, d.restartHint())}})
	}

	pauseNote := "pause_image " + d.shimOpts.PauseImage
	if d.shimOptsErr != nil {
		problems = append(problems, issue{Fail, fmt.Sprintf("the shim refuses the handler's options: %v", d.shimOptsErr),
			[]string{fmt.Sprintf("correct or remove the key in [%s.options] (known: pause_image, scratch_size_bytes, wine_template_prefix, host_build), then %s", table, d.restartHint())}})
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

// handlerFragment is the TOML table registering handler in a config of
// version version, as package containerdconfig writes it.
func handlerFragment(version int, handler string) []string {
	if version <= 2 {
		return []string{
			fmt.Sprintf(`[plugins.%q.containerd.runtimes.%s]`, pluginCRIv2, tomlKey(handler)),
			fmt.Sprintf(`  runtime_type = %q`, runtimeType),
			`  sandbox_mode = "shim"`,
			fmt.Sprintf(`  snapshotter = %q`, snapshotterName),
		}
	}
	return []string{
		fmt.Sprintf(`[plugins.'%s'.containerd.runtimes.%s]`, pluginCRIRun, tomlKey(handler)),
		fmt.Sprintf(`  runtime_type = %q`, runtimeType),
		`  sandboxer = "shim"`,
		fmt.Sprintf(`  snapshotter = %q`, snapshotterName),
	}
}

// issue is one problem a check found.
type issue struct {
	status Status
	msg    string
	fix    []string
}

// applyIssues folds problems into r: the worst status, the first failure
// (else warning) as the summary, the others as details, all fixes.
func applyIssues(r *Result, problems []issue) {
	if len(problems) == 0 {
		if r.Status == "" {
			r.Status = OK
		}
		return
	}
	worst := problems[0]
	for _, p := range problems {
		if p.status == Fail && worst.status != Fail {
			worst = p
		}
	}
	found := r.Summary
	r.Status, r.Summary = worst.status, worst.msg
	var details []string
	if found != "" {
		details = append(details, found)
	}
	for _, p := range problems {
		if p.msg != worst.msg {
			details = append(details, fmt.Sprintf("%s: %s", p.status, p.msg))
		}
	}
	r.Details = append(details, r.Details...)
	for _, p := range problems {
		for _, f := range p.fix {
			if !slices.Contains(r.Fix, f) {
				r.Fix = append(r.Fix, f)
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(no platform)"
	}
	return s
}

func isWindowsAMD64(s string) bool {
	p, err := platforms.Parse(s)
	return err == nil && p.OS == "windows" && p.Architecture == "amd64"
}

// ---- proxy plugins ----

func (d *run) snapshotterAddressHint() string {
	if d.cfg != nil {
		if p, ok := d.cfg.ProxyPlugins[snapshotterName]; ok && p.Address != "" {
			return p.Address
		}
	}
	if d.goos == "windows" {
		return containerdconfig.Windows().SnapshotterAddress
	}
	return "/run/winproc-snapshotter/snapshotter.sock"
}

// snapshotterRootHint is winproc-snapshotter's default root on the node's
// OS.
func (d *run) snapshotterRootHint() string {
	if d.sys.GOOS() == "windows" {
		return containerdnames.SnapshotterRootWindows
	}
	return "/var/lib/winproc-snapshotter"
}

func (d *run) checkProxyPlugins() {
	if d.cfg == nil {
		d.add(skipped(CheckProxyPlugins, "containerd's config could not be read"))
		return
	}
	c := d.cfg
	r := Result{Name: CheckProxyPlugins}
	addr := d.snapshotterAddressHint()
	var problems []issue
	var found []string
	for _, want := range []struct{ name, typ string }{{snapshotterName, "snapshot"}, {differName, "diff"}} {
		fix := []string{fmt.Sprintf("add to %s, then %s:", c.Path, d.restartHint()),
			fmt.Sprintf("[proxy_plugins.%s]", want.name),
			fmt.Sprintf(`  type = %q`, want.typ),
			fmt.Sprintf(`  address = %q`, addr),
			fmt.Sprintf(`  platform = %q`, layerPlatform)}
		p, ok := c.ProxyPlugins[want.name]
		switch {
		case !ok:
			problems = append(problems, issue{Fail, fmt.Sprintf("no [proxy_plugins.%s] (the %s plugin winproc-snapshotter serves)", want.name, want.typ), fix})
			continue
		case p.Type != want.typ:
			problems = append(problems, issue{Fail, fmt.Sprintf("[proxy_plugins.%s] has type %q, want %q", want.name, p.Type, want.typ), fix[1:]})
		case p.Address == "":
			problems = append(problems, issue{Fail, fmt.Sprintf("[proxy_plugins.%s] has no address", want.name), fix[1:]})
		case !isWindowsAMD64(p.Platform):
			problems = append(problems, issue{Warn, fmt.Sprintf("[proxy_plugins.%s] has platform %s; containerd gives it Windows layers only when it is %s", want.name, orNone(p.Platform), layerPlatform),
				[]string{fmt.Sprintf(`set platform = %q in [proxy_plugins.%s], then %s`, layerPlatform, want.name, d.restartHint())}})
		}
		found = append(found, fmt.Sprintf("%s (%s at %s, %s)", want.name, p.Type, p.Address, orNone(p.Platform)))
		for _, uri := range []string{"io.containerd.snapshotter.v1." + want.name, "io.containerd.differ.v1." + want.name} {
			if slices.Contains(c.DisabledPlugins, uri) {
				problems = append(problems, issue{Fail, fmt.Sprintf("disabled_plugins lists %s", uri),
					[]string{fmt.Sprintf("remove %q from disabled_plugins in %s, then %s", uri, c.Path, d.restartHint())}})
			}
		}
	}
	sp, dp := c.ProxyPlugins[snapshotterName], c.ProxyPlugins[differName]
	if sp.Type == "snapshot" && sp.Root == "" {
		problems = append(problems, issue{Warn, fmt.Sprintf("[proxy_plugins.%s] exports no root: containerd's CRI reports the image file system below its own root instead, where the kubelet measures nothing of winproc's", snapshotterName),
			[]string{fmt.Sprintf("add to [proxy_plugins.%s]: exports = { root = %q } (winproc-snapshotter's -root), then %s", snapshotterName, d.snapshotterRootHint(), d.restartHint())}})
	}
	if sp.Address != "" && dp.Address != "" && sp.Address != dp.Address {
		problems = append(problems, issue{Warn, fmt.Sprintf("the snapshotter (%s) and the differ (%s) have different addresses; winproc-snapshotter serves both on one", sp.Address, dp.Address),
			[]string{fmt.Sprintf("give [proxy_plugins.%s] the address of [proxy_plugins.%s]", differName, snapshotterName)}})
	}
	r.Summary = strings.Join(found, "; ")
	applyIssues(&r, problems)
	d.add(r)
}

// ---- unpack ----

// containerdDiffChain is containerd's own diff-service default
// (plugins/services/diff/service_windows.go and service_unix.go).
func containerdDiffChain(goos string) []string {
	if goos == "windows" {
		return []string{"windows", "windows-lcow"}
	}
	return []string{"walking"}
}

// checkDiffChain checks the diff service's differ order, which client-side
// unpacks (pulls that bypass the transfer service) use. It must keep
// containerd's chain whole; on Linux, where no differ of containerd's applies
// Windows layers, winproc's differ must be in it too. On Windows containerd's
// windows differ applies layers into windowsfilter snapshots as well.
func (d *run) checkDiffChain(r *Result) []issue {
	c := d.cfg
	own := containerdDiffChain(d.goos)
	table := fmt.Sprintf(`plugins.'%s'`, pluginDiff)
	if c.Version <= 2 {
		table = fmt.Sprintf(`plugins.%q`, pluginDiff)
	}
	var missing []string
	if c.DiffDefault != nil {
		for _, name := range own {
			if !slices.Contains(c.DiffDefault, name) {
				missing = append(missing, name)
			}
		}
	}
	needOurs := d.goos != "windows" && !slices.Contains(c.DiffDefault, differName)
	switch {
	case needOurs:
		want := append([]string{differName}, own...)
		msg := fmt.Sprintf("the diff service does not try %s (default = %q): client-side unpacks (ctr images pull --local) cannot apply Windows layers", differName, c.DiffDefault)
		if c.DiffDefault == nil {
			msg = fmt.Sprintf("the diff service does not try %s (no default set): client-side unpacks (ctr images pull --local) cannot apply Windows layers", differName)
		}
		return []issue{{Warn, msg, []string{fmt.Sprintf("set in [%s]: default = %s", table, quotedList(want))}}}
	case len(missing) > 0:
		fix := fmt.Sprintf("remove default from [%s] (containerd's own chain is %q), then %s", table, own, d.restartHint())
		return []issue{{Warn, fmt.Sprintf("the diff service default %q leaves out containerd's %s: client-side unpacks that need it fail", c.DiffDefault, strings.Join(missing, ", ")), []string{fix}}}
	}
	if r.Summary != "" {
		if c.DiffDefault == nil {
			r.Summary += fmt.Sprintf("; the diff service keeps containerd's chain (%s)", strings.Join(own, ", "))
		} else {
			r.Summary += fmt.Sprintf("; the diff service tries %s", strings.Join(c.DiffDefault, ", "))
		}
	}
	return nil
}

// quotedList writes names as a TOML list of strings.
func quotedList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func (d *run) checkUnpack() {
	if d.cfg == nil {
		d.add(skipped(CheckUnpack, "containerd's config could not be read"))
		return
	}
	c := d.cfg
	r := Result{Name: CheckUnpack}
	var problems []issue
	table := fmt.Sprintf(`plugins.'%s'`, pluginTransfer)
	if c.Version <= 2 {
		table = fmt.Sprintf(`plugins.%q`, pluginTransfer)
	}
	ruleFix := []string{fmt.Sprintf("add to %s, then %s:", c.Path, d.restartHint()),
		"[[" + table + ".unpack_config]]",
		fmt.Sprintf(`  platform = %q`, layerPlatform),
		fmt.Sprintf(`  snapshotter = %q`, snapshotterName),
		fmt.Sprintf(`  differ = %q`, differName)}
	// containerd's transfer service unpacks with the rule whose platform
	// and snapshotter match the pull, so a rule for its own windows
	// snapshotter beside ours is fine; without ours, the first Windows
	// rule is the one to correct.
	var rule *UnpackRule
	for i, u := range c.UnpackRules {
		if !isWindowsAMD64(u.Platform) {
			continue
		}
		if rule == nil || (u.Snapshotter == snapshotterName && rule.Snapshotter != snapshotterName) {
			rule = &c.UnpackRules[i]
		}
	}
	switch {
	case rule == nil:
		st := Fail
		msg := fmt.Sprintf("the transfer service has no unpack rule for %s: pulls cannot unpack Windows layers into %s", layerPlatform, snapshotterName)
		if c.Version <= 2 {
			// containerd 1.7's CRI does not pull through the transfer
			// service.
			st = Warn
			msg = fmt.Sprintf("the transfer service has no unpack rule for %s (containerd 1.7's CRI does not use it; ctr transfer pulls do)", layerPlatform)
		}
		problems = append(problems, issue{st, msg, ruleFix})
	case rule.Snapshotter != snapshotterName || rule.Differ != differName:
		problems = append(problems, issue{Fail, fmt.Sprintf("the unpack rule for %s uses snapshotter %q and differ %q; winproc's are %s and %s", rule.Platform, rule.Snapshotter, rule.Differ, snapshotterName, differName), ruleFix[1:]})
	default:
		r.Summary = fmt.Sprintf("%s layers unpack with %s into %s", rule.Platform, rule.Differ, rule.Snapshotter)
	}
	problems = append(problems, d.checkDiffChain(&r)...)
	applyIssues(&r, problems)
	d.add(r)
}
