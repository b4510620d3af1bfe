package doctor

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf16"

	"github.com/containerd/errdefs"
)

// Services is what the node shutdown check reads of a Windows node's
// service manager and registry.
type Services interface {
	// Dependencies lists the services and load order groups (with a "+"
	// before a group's name, as sc.exe writes them) the service name
	// depends on; an error matching errdefs.ErrNotFound when there is no
	// such service.
	Dependencies(name string) ([]string, error)
	// PreshutdownOrder is the PreshutdownOrder value under
	// HKLM\SYSTEM\CurrentControlSet\Control (REG_MULTI_SZ): the services
	// the service manager sends the preshutdown notice in this order;
	// empty when it is not set.
	PreshutdownOrder() ([]string, error)
}

// Service names of the shutdown chain. The kubelet's is the one its
// graceful node shutdown opens (kubernetes pkg/kubelet/nodeshutdown
// nodeshutdown_manager_windows.go, serviceKubelet); containerd's is the one
// `containerd --register-service` registers by default; the snapshotter's
// is install.ps1's (cmd/winproc-snapshotter's serviceName).
const (
	kubeletService     = "kubelet"
	containerdService  = "containerd"
	snapshotterService = "winproc-snapshotter"
)

// preshutdownOrderKey names the registry value in the check's findings.
const preshutdownOrderKey = `HKLM\SYSTEM\CurrentControlSet\Control\PreshutdownOrder`

// checkShutdown checks the order the node's services stop in at shutdown.
// The kubelet's graceful node shutdown (default on Windows since
// Kubernetes 1.34) reads the kubelet service's dependencies when it starts
// and places itself before the first of them in PreshutdownOrder; the
// service manager sends the preshutdown notice in that order and waits for
// each, so the kubelet stops the pods through the CRI while containerd
// (which accepts only the later shutdown notice) and winproc-snapshotter,
// which containerd needs to stop and remove containers, still run. That
// holds when the kubelet depends on containerd and containerd on the
// snapshotter.
func (d *run) checkShutdown() {
	svcs := d.sys.Services()
	if svcs == nil {
		d.add(Result{Name: CheckShutdown, Status: OK, Summary: "not checked: this node has no Windows service manager (the emulation); containerd and the snapshotter are not services"})
		return
	}
	d.add(shutdownResult(svcs))
}

// shutdownResult is the node shutdown check's result for the services svcs.
func shutdownResult(svcs Services) Result {
	r := Result{Name: CheckShutdown}
	cdDeps, err := svcs.Dependencies(containerdService)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		r.Status, r.Summary = OK, "not checked: containerd does not run as a Windows service here, so the service manager does not order its shutdown"
		return r
	case err != nil:
		r.Status, r.Summary = Warn, fmt.Sprintf("cannot read the containerd service's dependencies: %v", err)
		r.Fix = []string{"run winproc doctor as an administrator (sc.exe qc containerd shows them)"}
		return r
	}
	var problems []issue
	problems = append(problems, snapshotterOrder(svcs, cdDeps)...)
	kubeletDeps, err := svcs.Dependencies(kubeletService)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		r.Summary = fmt.Sprintf("containerd depends on %s; no kubelet service, so no graceful node shutdown to order", formatDeps(cdDeps))
	case err != nil:
		problems = append(problems, issue{Warn, fmt.Sprintf("cannot read the kubelet service's dependencies: %v", err), []string{"run winproc doctor as an administrator (sc.exe qc kubelet shows them)"}})
	default:
		r.Summary = fmt.Sprintf("kubelet depends on %s, containerd on %s", formatDeps(kubeletDeps), formatDeps(cdDeps))
		problems = append(problems, kubeletOrder(svcs, kubeletDeps)...)
	}
	applyIssues(&r, problems)
	return r
}

// snapshotterOrder checks that containerd depends on the snapshotter's
// service, where there is one.
func snapshotterOrder(svcs Services, cdDeps []string) []issue {
	_, err := svcs.Dependencies(snapshotterService)
	switch {
	case errors.Is(err, errdefs.ErrNotFound):
		return []issue{{Warn, fmt.Sprintf("%s is not a service (a startup task, install.ps1 -SnapshotterAsTask): nothing keeps it running until containerd has stopped", snapshotterService),
			[]string{fmt.Sprintf("run it as a service: rerun install.ps1 without -SnapshotterAsTask (it also makes containerd depend on %s)", snapshotterService)}}}
	case err != nil:
		return []issue{{Warn, fmt.Sprintf("cannot read the %s service: %v", snapshotterService, err), []string{"run winproc doctor as an administrator"}}}
	}
	if containsFold(cdDeps, snapshotterService) {
		return nil
	}
	return []issue{{Warn, fmt.Sprintf("containerd does not depend on %s: the service manager may start containerd first, and stop the snapshotter while containerd still needs it to stop and remove containers", snapshotterService),
		[]string{fmt.Sprintf("sc.exe config %s depend= %s", containerdService, dependList(cdDeps, snapshotterService))}}}
}

// kubeletOrder checks that the kubelet depends on containerd and has
// placed itself before its dependencies in PreshutdownOrder.
func kubeletOrder(svcs Services, kubeletDeps []string) []issue {
	restart := "Restart-Service kubelet (it writes PreshutdownOrder when it starts)"
	if !containsFold(kubeletDeps, containerdService) {
		return []issue{{Warn, "the kubelet does not depend on containerd: its graceful node shutdown does not place it before containerd in PreshutdownOrder, and containerd may stop before the kubelet has stopped the pods",
			[]string{fmt.Sprintf("sc.exe config %s depend= %s", kubeletService, dependList(kubeletDeps, containerdService)), restart}}}
	}
	order, err := svcs.PreshutdownOrder()
	if err != nil {
		return []issue{{Warn, fmt.Sprintf("cannot read %s: %v", preshutdownOrderKey, err), []string{"run winproc doctor as an administrator"}}}
	}
	at := slices.IndexFunc(order, func(s string) bool { return strings.EqualFold(s, kubeletService) })
	if at < 0 {
		return []issue{{Warn, fmt.Sprintf("graceful node shutdown is off: the kubelet is not in %s (%s)", preshutdownOrderKey, formatDeps(order)),
			[]string{"set shutdownGracePeriod and shutdownGracePeriodCriticalPods in the kubelet's configuration (feature gate WindowsGracefulNodeShutdown, default on since Kubernetes 1.34), run the kubelet as a service, then " + restart}}}
	}
	var late []string
	for _, dep := range kubeletDeps {
		if strings.HasPrefix(dep, "+") {
			continue // a group; the kubelet does not place groups
		}
		i := slices.IndexFunc(order, func(s string) bool { return strings.EqualFold(s, dep) })
		if i < at {
			late = append(late, dep)
		}
	}
	if len(late) == 0 {
		return nil
	}
	return []issue{{Warn, fmt.Sprintf("%s (%s) does not list the kubelet before %s: the kubelet has not started since its dependencies changed", preshutdownOrderKey, formatDeps(order), strings.Join(late, ", ")),
		[]string{restart}}}
}

// dependList is sc.exe's depend= value that keeps deps and adds add.
func dependList(deps []string, add string) string {
	return strings.Join(append(slices.Clone(deps), add), "/")
}

func formatDeps(deps []string) string {
	if len(deps) == 0 {
		return "nothing"
	}
	return strings.Join(deps, ", ")
}

// containsFold reports whether list has s; service names are
// case-insensitive.
func containsFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
}

// splitMultiSZ splits a list of NUL-terminated UTF-16 strings that ends
// with an empty one (a REG_MULTI_SZ, a service's lpDependencies); a list
// that runs to the end of b without one ends there.
func splitMultiSZ(b []uint16) []string {
	var out []string
	for len(b) > 0 && b[0] != 0 {
		end := slices.Index(b, 0)
		if end < 0 {
			end = len(b)
		}
		out = append(out, string(utf16.Decode(b[:end])))
		b = b[min(end+1, len(b)):]
	}
	return out
}
