package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containerd/errdefs"
)

// ---- shim ----

// findShim finds the shim binary as containerd would: the handler's
// runtime_path (or a runtime_type that is a path), else on PATH, else
// beside containerd. It returns the path, how it was found, and where it
// looked in vain.
func (d *run) findShim() (found, how string, looked []string) {
	name := d.shimBinary()
	switch {
	case d.o.Shim != "":
		return d.o.Shim, "--shim", nil
	case d.rt != nil && d.rt.RuntimePath != "":
		return d.rt.RuntimePath, "the handler's runtime_path", nil
	case d.rt != nil && d.rt.RuntimeType != runtimeType && strings.ContainsAny(d.rt.RuntimeType, `/\`):
		return d.rt.RuntimeType, "the handler's runtime_type", nil
	}
	if p, err := d.sys.LookPath(name); err == nil {
		return p, "on PATH", nil
	}
	looked = append(looked, "PATH")
	var dirs []string
	containerd := "containerd"
	if d.goos == "windows" {
		containerd += ".exe"
	}
	if p, err := d.sys.LookPath(containerd); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	if d.goos == "windows" {
		pf := d.sys.Getenv("ProgramFiles")
		if pf == "" {
			pf = `C:\Program Files`
		}
		dirs = append(dirs, pf+`\containerd\bin`, pf+`\containerd`)
	}
	for _, dir := range dirs {
		if slices.Contains(looked, dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if d.goos == "windows" {
			p = strings.TrimSuffix(dir, `\`) + `\` + name
		}
		if d.sys.IsFile(p) {
			return p, "beside containerd", nil
		}
		looked = append(looked, dir)
	}
	return "", "", looked
}

func (d *run) installShimFix() []string {
	if d.goos == "windows" {
		return []string{fmt.Sprintf("copy %s (`make windows` builds it into bin/windows/) into the directory of containerd.exe or a directory on containerd's PATH, or pass --shim FILE", d.shimBinary())}
	}
	return []string{fmt.Sprintf("install %s (`make build` builds it into bin/) into a directory on containerd's PATH or beside containerd, or pass --shim FILE", d.shimBinary())}
}

func (d *run) checkShim(ctx context.Context) {
	r := Result{Name: CheckShim}
	shim, how, looked := d.findShim()
	if shim == "" {
		r.Status = Fail
		r.Summary = fmt.Sprintf("%s is not on PATH or beside containerd", d.shimBinary())
		if len(looked) > 0 {
			r.Details = append(r.Details, "looked in: "+strings.Join(looked, ", "))
		}
		r.Fix = d.installShimFix()
		d.add(r)
		return
	}
	var problems []issue
	cctx, cancel := d.ctx(ctx)
	out, err := d.sys.ShimInfo(cctx, shim)
	cancel()
	var info ShimInfo
	if err == nil {
		info, err = decodeShimInfo(out)
	}
	switch {
	case err != nil:
		problems = append(problems, issue{Fail, fmt.Sprintf("%s (%s) does not answer -info: %v", shim, how, err), d.installShimFix()})
	case info.Name != runtimeType:
		problems = append(problems, issue{Fail, fmt.Sprintf("%s (%s) is runtime %q, not %s", shim, how, info.Name, runtimeType), d.installShimFix()})
	default:
		r.Summary = fmt.Sprintf("%s (%s) answers -info: %s %s", shim, how, info.Name, info.Version)
	}

	// containerd's own lookup: its PATH is the service's, not ours.
	if d.cd != nil {
		rtName := runtimeType
		if d.rt != nil && d.rt.RuntimePath != "" {
			rtName = d.rt.RuntimePath
		} else if d.rt != nil && d.rt.RuntimeType != "" {
			rtName = d.rt.RuntimeType
		}
		cctx, cancel := d.ctx(ctx)
		ci, err := d.cd.RuntimeInfo(cctx, rtName)
		cancel()
		switch {
		case err == nil:
			r.Details = append(r.Details, fmt.Sprintf("containerd runs it too: %s %s", ci.Name, ci.Version))
		case errdefs.IsUnavailable(err) || errdefs.IsDeadlineExceeded(err):
			r.Details = append(r.Details, "containerd did not answer: whether containerd finds the shim is not checked")
		case errdefs.IsNotImplemented(err):
			r.Details = append(r.Details, "containerd cannot run a shim's -info for clients (before 2.0): whether it finds the shim is not checked")
		default:
			problems = append(problems, issue{Fail, fmt.Sprintf("containerd cannot run the shim of %s: %v", rtName, err),
				append(d.installShimFix(), "containerd looks on its own PATH (the service's environment) and in its own directory")})
		}
	}
	applyIssues(&r, problems)
	d.add(r)
}

// ---- containerd ----

func (d *run) checkContainerd(ctx context.Context) {
	r := Result{Name: CheckContainerd}
	startFix := []string{fmt.Sprintf("start containerd (%s) or pass --address with its socket", strings.Replace(d.restartHint(), "restart", "start", 1))}
	if d.goos == "windows" {
		startFix = []string{"start containerd (Start-Service containerd; containerd.exe --register-service registers it) or pass --address with its pipe"}
	}
	if d.cdErr != nil {
		r.Status, r.Summary, r.Fix = Fail, fmt.Sprintf("cannot connect to containerd at %s: %v", d.address, d.cdErr), startFix
		d.add(r)
		return
	}
	cctx, cancel := d.ctx(ctx)
	version, revision, err := d.cd.Version(cctx)
	cancel()
	if err != nil {
		r.Status, r.Summary, r.Fix = Fail, fmt.Sprintf("containerd does not answer at %s: %v", d.address, err), startFix
		d.add(r)
		return
	}
	d.cdUp = true
	r.Summary = fmt.Sprintf("containerd %s at %s", version, d.address)
	if revision != "" {
		r.Summary = fmt.Sprintf("containerd %s (%s) at %s", version, revision, d.address)
	}
	var problems []issue
	cctx, cancel = d.ctx(ctx)
	handlers, err := d.cd.RuntimeHandlers(cctx)
	cancel()
	cfgPath := d.o.ConfigPath
	switch {
	case errdefs.IsNotImplemented(err):
		problems = append(problems, issue{Fail, fmt.Sprintf("containerd serves no CRI, which the kubelet needs: %v", err),
			[]string{fmt.Sprintf(`remove "io.containerd.grpc.v1.cri" from disabled_plugins in %s, then %s`, cfgPath, d.restartHint())}})
	case err != nil:
		problems = append(problems, issue{Warn, fmt.Sprintf("containerd's CRI status: %v", err), nil})
	case len(handlers) == 0:
		r.Details = append(r.Details, "its CRI does not list runtime handlers (containerd before 2.0)")
	default:
		shown := make([]string, len(handlers))
		for i, h := range handlers {
			shown[i] = h
			if h == "" {
				shown[i] = "(default)"
			}
		}
		switch {
		case slices.Contains(handlers, d.o.Handler):
			r.Details = append(r.Details, "CRI runtime handlers: "+strings.Join(shown, ", "))
		case d.rt == nil:
			// The config lacks it too: the handler check says what to do.
			r.Details = append(r.Details, "CRI runtime handlers: "+strings.Join(shown, ", ")+fmt.Sprintf(" (not %q, which the config lacks too)", d.o.Handler))
		default:
			problems = append(problems, issue{Fail, fmt.Sprintf("containerd's CRI does not serve handler %q (it serves %s): it runs with another config, or was not restarted since the handler was added", d.o.Handler, strings.Join(shown, ", ")),
				[]string{fmt.Sprintf("%s, and make sure it reads %s (containerd --config %s)", d.restartHint(), cfgPath, cfgPath)}})
		}
	}
	applyIssues(&r, problems)
	d.add(r)
}

// ---- snapshotter ----

func (d *run) startSnapshotterFix(addr string) []string {
	if d.goos == "windows" {
		return []string{fmt.Sprintf("start winproc-snapshotter.exe -address %s (as a service that starts before containerd)", addr)}
	}
	return []string{fmt.Sprintf("start winproc-snapshotter -address %s -containerd-address %s (before containerd)", addr, d.address)}
}

func (d *run) checkSnapshotter(ctx context.Context) {
	if d.cfg == nil {
		d.add(skipped(CheckSnapshotter, "containerd's config could not be read"))
		return
	}
	p, ok := d.cfg.ProxyPlugins[snapshotterName]
	if !ok || p.Address == "" {
		d.add(skipped(CheckSnapshotter, fmt.Sprintf("the config gives no address for proxy plugin %s", snapshotterName)))
		return
	}
	r := Result{Name: CheckSnapshotter}
	cctx, cancel := d.ctx(ctx)
	err := d.sys.Dial(cctx, p.Address)
	cancel()
	if err != nil {
		r.Status = Fail
		r.Summary = fmt.Sprintf("nothing answers at %s, the address of proxy plugin %s: %v", p.Address, snapshotterName, err)
		r.Fix = d.startSnapshotterFix(p.Address)
		d.add(r)
		return
	}
	r.Status = OK
	r.Summary = fmt.Sprintf("winproc-snapshotter answers at %s", p.Address)
	if dp, ok := d.cfg.ProxyPlugins[differName]; ok && dp.Address != "" && dp.Address != p.Address {
		cctx, cancel := d.ctx(ctx)
		err := d.sys.Dial(cctx, dp.Address)
		cancel()
		if err != nil {
			applyIssues(&r, []issue{{Fail, fmt.Sprintf("nothing answers at %s, the address of proxy plugin %s: %v", dp.Address, differName, err), d.startSnapshotterFix(dp.Address)}})
		}
	}
	d.add(r)
}

// ---- plugins ----

func (d *run) checkPlugins(ctx context.Context) {
	if !d.cdUp {
		d.add(skipped(CheckPlugins, "containerd did not answer"))
		return
	}
	r := Result{Name: CheckPlugins}
	var problems []issue
	var loaded []string
	for _, want := range []struct{ typ, id string }{
		{"io.containerd.snapshotter.v1", snapshotterName},
		{"io.containerd.differ.v1", differName},
	} {
		cctx, cancel := d.ctx(ctx)
		ps, err := d.cd.Plugins(cctx, fmt.Sprintf("type==%q,id==%q", want.typ, want.id))
		cancel()
		switch {
		case err != nil:
			problems = append(problems, issue{Fail, fmt.Sprintf("list containerd's plugins: %v", err), nil})
		case len(ps) == 0:
			problems = append(problems, issue{Fail, fmt.Sprintf("containerd has no %s plugin %s: it runs with another config, or one without [proxy_plugins.%s]", want.typ, want.id, want.id),
				[]string{fmt.Sprintf("%s, and make sure it reads %s (see the proxy plugins check)", d.restartHint(), d.o.ConfigPath)}})
		case ps[0].InitErr != "":
			problems = append(problems, issue{Fail, fmt.Sprintf("containerd could not load %s plugin %s: %s", want.typ, want.id, ps[0].InitErr),
				[]string{fmt.Sprintf("start winproc-snapshotter first, then %s", d.restartHint())}})
		default:
			s := want.typ + " " + want.id
			if len(ps[0].Platforms) > 0 {
				s += " (" + strings.Join(ps[0].Platforms, ", ") + ")"
			}
			loaded = append(loaded, s)
		}
	}
	r.Summary = "loaded: " + strings.Join(loaded, "; ")
	applyIssues(&r, problems)
	d.add(r)
}
