package doctor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/containerd/platforms"

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
