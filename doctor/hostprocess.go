package doctor

import (
	"fmt"
	"slices"

	"github.com/Microsoft/hcsshim/pkg/annotations"
)

// containerd's default CRI handler when the config names none.
func containerdDefaultRuntime(goos string) string {
	if goos == "windows" {
		return "runhcs-wcow-process"
	}
	return "runc"
}

// checkHostProcess says whether the node's HostProcess pods run on
// winproc. kube-proxy, CNI plugins and csi-proxy run as HostProcess
// DaemonSets that name no RuntimeClass: they run on containerd's default
// handler, so winproc runs them only as that default. Being a second
// handler is no fault; it is said so. A fault is a handler that does not
// pass the inherit-user annotation, which such pods then lose silently.
func (d *run) checkHostProcess() {
	if d.rt == nil {
		d.add(skipped(CheckHostProcess, fmt.Sprintf("handler %q is not registered", d.o.Handler)))
		return
	}
	r := Result{Name: CheckHostProcess, Status: OK}
	def := d.cfg.DefaultRuntime
	if def == "" {
		def = containerdDefaultRuntime(d.goos)
	}
	if def == d.o.Handler {
		r.Summary = fmt.Sprintf("%s is the default handler: HostProcess pods (kube-proxy, CNI, csi-proxy DaemonSets) run on winproc with no RuntimeClass", d.o.Handler)
	} else {
		r.Summary = fmt.Sprintf("the default handler is %s: HostProcess pods run on winproc only with runtimeClassName %s", def, d.o.Handler)
		r.Details = append(r.Details, fmt.Sprintf("to run the node's HostProcess DaemonSets on winproc, make it the default: set default_runtime_name = %q in [plugins.'%s'.containerd] (install.ps1 -DefaultHandler does), then %s", d.o.Handler, pluginCRIRun, d.restartHint()))
	}
	r.Details = append(r.Details, "HostProcess images may be built for any Windows build when they hold no Windows base layer (the HostProcess base image); one built on nanoserver or servercore must match the host like any image")
	var problems []issue
	if !slices.Contains(d.rt.PodAnnotations, annotations.HostProcessInheritUser) {
		problems = append(problems, issue{Warn, fmt.Sprintf("the handler does not pass the pod annotation %s: a HostProcess pod that asks to run as winproc's own account runs as its runAsUserName instead", annotations.HostProcessInheritUser),
			[]string{fmt.Sprintf("add %q to pod_annotations in [%s], then %s", annotations.HostProcessInheritUser, d.cfg.RuntimeTable(d.o.Handler), d.restartHint())}})
	}
	applyIssues(&r, problems)
	d.add(r)
}
