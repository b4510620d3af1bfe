// Package doctor checks a node's winproc setup, as `winproc doctor` reports
// it: containerd's config registers the runtime handler, the windowsfilter
// snapshotter and differ and the unpack rule for Windows layers, and lets
// containerd unpack a pull's layers in parallel where winproc can (off
// Windows) and not where it cannot (Windows); the shim
// binary is where containerd finds it and answers -info; containerd and the
// snapshotter answer and containerd loaded the snapshotter; the pause image
// is in containerd, unpacked, built for the host's Windows build and holds
// pause.exe and wincat.exe; RuntimeClass manifests that name the handler
// select nodes of this build and tolerate the os=windows taint; no compute
// system is left that no running shim serves and containerd has no task
// of (orphans, where the node's Leftovers can list them: the Linux
// emulation, and on Windows HCS's compute systems and the HCS and
// HostProcess backends' records), which Options.Fix removes; and which
// teardowns or terminates are still carried on in the background
// (terminations); and, on a Windows node, that containerd depends on the
// snapshotter's service and the kubelet on containerd, and that the kubelet
// placed itself before them in PreshutdownOrder (node shutdown).
//
// Every check says what it found and, when something is wrong, a concrete
// fix. The checks reach the node only through System (files, programs,
// sockets and pipes, containerd), so the same code runs on a Windows node,
// against the Linux emulation in the integration tests, and against fakes
// in the unit tests.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/winproc/winproc/internal/containerdnames"
)

// Status is a check's outcome.
type Status string

const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Result is one check's outcome.
type Result struct {
	// Name names the check, e.g. "pause image".
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Summary is one line: what was found, or the first problem.
	Summary string `json:"summary"`
	// Details are further findings, one line each.
	Details []string `json:"details,omitempty"`
	// Fix says what to do, when Status is not OK: commands to run or
	// config to add, one line each.
	Fix []string `json:"fix,omitempty"`
}

// Report is the outcome of all checks.
type Report struct {
	// Handler, Config, Address and HostBuild are what the checks ran
	// against.
	Handler   string   `json:"handler"`
	Config    string   `json:"config"`
	Address   string   `json:"address"`
	HostBuild string   `json:"host_build"`
	Checks    []Result `json:"checks"`
	// OK is true when no check failed (warnings allowed).
	OK bool `json:"ok"`
}

// Failed returns the failed checks.
func (r *Report) Failed() []Result {
	var out []Result
	for _, c := range r.Checks {
		if c.Status == Fail {
			out = append(out, c)
		}
	}
	return out
}

// Check returns the result of the check named name, nil if it did not run.
func (r *Report) Check(name string) *Result {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	return nil
}

// Names of the checks, in report order.
const (
	CheckConfig       = "config"
	CheckHandler      = "handler"
	CheckProxyPlugins = "proxy plugins"
	CheckUnpack       = "unpack"
	CheckShim         = "shim"
	CheckContainerd   = "containerd"
	CheckSnapshotter  = "snapshotter"
	CheckPlugins      = "plugins"
	CheckPauseImage   = "pause image"
	CheckRuntimeClass = "runtimeclass"
	CheckStateDirs    = "state dirs"
	CheckHostProcess  = "hostprocess"
	CheckOrphans      = "orphans"
	CheckTerminations = "terminations"
	CheckShutdown     = "node shutdown"
)

// DefaultHandler is the runtime handler name the checks look for.
const DefaultHandler = "winproc"

// DefaultNamespace is the containerd namespace of CRI, where the kubelet's
// pods and images live.
const DefaultNamespace = "k8s.io"

// DefaultEmulatedHostBuild is the Windows build the Linux emulation claims
// when the handler's options set no host_build (as the shim and the
// snapshotter do).
const DefaultEmulatedHostBuild = "10.0.20348"

// Names the checks use from the config generator.
const (
	runtimeType     = containerdnames.RuntimeType
	snapshotterName = containerdnames.Snapshotter
	differName      = containerdnames.Differ
	layerPlatform   = containerdnames.Platform
)

// Options say what to check.
type Options struct {
	// ConfigPath is containerd's config; "" is DefaultConfigPath.
	ConfigPath string
	// Address is containerd's socket or named pipe; "" is the config's
	// grpc address, else containerd's platform default.
	Address string
	// Handler is the CRI runtime handler; "" is DefaultHandler.
	Handler string
	// Namespace is the containerd namespace of the pause image; "" is
	// DefaultNamespace.
	Namespace string
	// HostBuild is the Windows build to check images and RuntimeClasses
	// against, e.g. 10.0.20348; "" is the host's own on Windows, else the
	// handler's host_build option, else DefaultEmulatedHostBuild.
	HostBuild string
	// Shim is the shim binary to check; "" finds it as containerd does.
	Shim string
	// RuntimeClasses are RuntimeClass manifest files (YAML or JSON, one or
	// more documents, List kinds too); none skips that check.
	RuntimeClasses []string
	// Timeout bounds each call to containerd, the snapshotter and the
	// shim; 0 is 10 seconds.
	Timeout time.Duration
	// System is the node; nil is the machine the doctor runs on.
	System System
	// Fix has the orphans check remove the orphans it finds.
	Fix bool
}

// DefaultConfigPath is where containerd reads its config by default on the
// platform the doctor runs on.
func DefaultConfigPath() string { return defaultConfigPathFor(runtime.GOOS, os.Getenv) }

// Run runs every check and returns the report. It does not fail: what it
// cannot check is a failed or warned check in the report.
func Run(ctx context.Context, o Options) *Report {
	d := newRun(o)
	defer d.close()
	d.checkConfig()
	d.checkHandler()
	d.checkProxyPlugins()
	d.checkUnpack()
	d.checkShim(ctx)
	d.checkContainerd(ctx)
	d.checkSnapshotter(ctx)
	d.checkPlugins(ctx)
	d.checkPauseImage(ctx)
	d.checkStateDirs()
	d.checkHostProcess()
	d.checkOrphans(ctx)
	d.checkTerminations()
	d.checkShutdown()
	if len(o.RuntimeClasses) > 0 {
		d.checkRuntimeClasses()
	}
	d.report.OK = len(d.report.Failed()) == 0
	return &d.report
}

// WriteText writes the report for a person: one line per check, details and
// fixes indented below it.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "winproc doctor: handler %s, config %s, containerd %s, host build %s\n\n", r.Handler, r.Config, r.Address, r.HostBuild)
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	const indent = "      "
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Summary)
		for _, d := range c.Details {
			fmt.Fprintf(&b, "%s%s\n", indent, d)
		}
		for i, f := range c.Fix {
			label := "fix: "
			if i > 0 {
				label = "     "
			}
			fmt.Fprintf(&b, "%s%s%s\n", indent, label, f)
		}
	}
	failed, warned := 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Fail:
			failed++
		case Warn:
			warned++
		}
	}
	fmt.Fprintf(&b, "\n%d checks: %d failed, %d warnings\n", len(r.Checks), failed, warned)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
