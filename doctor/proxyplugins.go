package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/winproc/winproc/containerdconfig"
	"github.com/winproc/winproc/internal/containerdnames"
)

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
	problems = append(problems, d.checkParallelUnpack(&r)...)
	applyIssues(&r, problems)
	d.add(r)
}
