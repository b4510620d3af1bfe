package cri

import (
	"maps"
	"slices"
	"strings"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// checkLinux refuses the Linux fields that are set to something a
// Windows pod cannot do, and accepts what the kubelet sends for every
// Windows pod (see the package doc). It reports whether the config asks
// for the host's network.
func checkLinux(l *runtime.LinuxPodSandboxConfig, p *problems) (hostNetwork bool) {
	if l == nil {
		return false
	}
	// CgroupParent: the kubelet's pod cgroup; Windows has no cgroups and
	// nothing to refuse. Ignored.
	if len(l.GetSysctls()) > 0 {
		p.add("spec.securityContext.sysctls (CRI linux.sysctls: %s) are Linux kernel parameters with no Windows equivalent: remove them",
			strings.Join(slices.Sorted(maps.Keys(l.GetSysctls())), ", "))
	}
	sc := l.GetSecurityContext()
	if sc == nil {
		return false
	}
	hostNetwork = checkNamespaces(sc.GetNamespaceOptions(), p)

	if se := sc.GetSelinuxOptions(); se.GetUser() != "" || se.GetRole() != "" || se.GetType() != "" || se.GetLevel() != "" {
		p.add("spec.securityContext.seLinuxOptions (CRI linux.security_context.selinux_options) do not apply to Windows pods: remove them")
	}
	if sc.GetRunAsUser() != nil {
		p.add("spec.securityContext.runAsUser (CRI linux.security_context.run_as_user) is a Linux UID: remove it and use spec.securityContext.windowsOptions.runAsUserName")
	}
	if sc.GetRunAsGroup() != nil {
		p.add("spec.securityContext.runAsGroup (CRI linux.security_context.run_as_group) is a Linux GID with no Windows equivalent: remove it")
	}
	if sc.GetReadonlyRootfs() {
		p.add("readOnlyRootFilesystem (CRI linux.security_context.readonly_rootfs) is not supported for Windows containers, whose system drive is always writable: remove spec.containers[*].securityContext.readOnlyRootFilesystem")
	}
	if len(sc.GetSupplementalGroups()) > 0 {
		p.add("spec.securityContext.supplementalGroups (CRI linux.security_context.supplemental_groups, also filled from fsGroup and volumes' pv.beta.kubernetes.io/gid annotations) are Linux GIDs with no Windows equivalent: remove them")
	}
	if sc.GetSupplementalGroupsPolicy() != runtime.SupplementalGroupsPolicy_Merge {
		p.add("spec.securityContext.supplementalGroupsPolicy (CRI linux.security_context.supplemental_groups_policy: %s) does not apply to Windows pods: remove it", sc.GetSupplementalGroupsPolicy())
	}
	if sc.GetPrivileged() {
		p.add("privileged containers (spec.containers[*].securityContext.privileged, CRI linux.security_context.privileged) do not exist on Windows (HostProcess pods are the nearest thing, " +
			"and winproc does not run them): remove privileged")
	}
	checkProfile("spec.securityContext.seccompProfile", "linux.security_context.seccomp", sc.GetSeccomp(), p)
	checkProfile("spec.securityContext.appArmorProfile", "linux.security_context.apparmor", sc.GetApparmor(), p)
	// The deprecated path form is still a way to ask for a profile.
	if path := sc.GetSeccompProfilePath(); path != "" && path != "runtime/default" && path != "docker/default" && path != "unconfined" {
		p.add("spec.securityContext.seccompProfile (CRI linux.security_context.seccomp_profile_path %q): Windows has no seccomp: remove the profile", path)
	}
	return hostNetwork
}

// checkNamespaces takes the pod's Linux namespace modes. POD and
// CONTAINER for pid and ipc are what the kubelet sends (and POD is also
// the unset value): accepted. NODE for pid, ipc and user namespaces is
// refused; NODE for the network is host networking, recorded.
func checkNamespaces(ns *runtime.NamespaceOption, p *problems) (hostNetwork bool) {
	if ns == nil {
		return false
	}
	switch ns.GetNetwork() {
	case runtime.NamespaceMode_POD:
	case runtime.NamespaceMode_NODE:
		hostNetwork = true
	default:
		p.add("CRI linux.security_context.namespace_options.network is %s, which is not a pod network mode: use POD, or NODE for spec.hostNetwork", ns.GetNetwork())
	}
	switch ns.GetPid() {
	case runtime.NamespaceMode_POD, runtime.NamespaceMode_CONTAINER:
	case runtime.NamespaceMode_NODE:
		p.add("spec.hostPID (CRI linux.security_context.namespace_options.pid: NODE) does not apply to Windows pods: a process-isolated container cannot share the host's processes, remove hostPID")
	default:
		p.add("CRI linux.security_context.namespace_options.pid is %s, which is not a pod pid mode (TARGET is for ephemeral containers): use CONTAINER", ns.GetPid())
	}
	switch ns.GetIpc() {
	case runtime.NamespaceMode_POD, runtime.NamespaceMode_CONTAINER:
	case runtime.NamespaceMode_NODE:
		p.add("spec.hostIPC (CRI linux.security_context.namespace_options.ipc: NODE) does not apply to Windows pods: a process-isolated container has its own object namespace, remove hostIPC")
	default:
		p.add("CRI linux.security_context.namespace_options.ipc is %s, which is not a pod ipc mode: use POD", ns.GetIpc())
	}
	if ns.GetTargetId() != "" {
		p.add("CRI linux.security_context.namespace_options.target_id (%q) is for ephemeral containers, not pods: remove it", ns.GetTargetId())
	}
	if u := ns.GetUsernsOptions(); u != nil {
		switch u.GetMode() {
		case runtime.NamespaceMode_NODE:
		case runtime.NamespaceMode_POD:
			p.add("spec.hostUsers: false (CRI linux.security_context.namespace_options.userns_options mode POD) asks for a Linux user namespace, which Windows pods do not have: remove hostUsers")
		default:
			p.add("CRI linux.security_context.namespace_options.userns_options mode %s is not a user namespace mode: leave userns_options unset", u.GetMode())
		}
	}
	return hostNetwork
}

// checkWindowsNamespaces takes windows.security_context.namespace_options
// (the withdrawn WindowsHostNetwork feature; the kubelet leaves it unset).
func checkWindowsNamespaces(ns *runtime.WindowsNamespaceOption, p *problems) (hostNetwork bool) {
	switch ns.GetNetwork() {
	case runtime.NamespaceMode_POD:
		return false
	case runtime.NamespaceMode_NODE:
		return true
	}
	p.add("CRI windows.security_context.namespace_options.network is %s, which is not a pod network mode: use POD, or NODE for spec.hostNetwork", ns.GetNetwork())
	return false
}

// checkProfile accepts no profile, RuntimeDefault (the kubelet always
// asks for it for seccomp; on Windows the runtime's default is none) and
// Unconfined, and refuses a Localhost profile.
func checkProfile(field, criField string, sp *runtime.SecurityProfile, p *problems) {
	if sp == nil {
		return
	}
	switch sp.GetProfileType() {
	case runtime.SecurityProfile_RuntimeDefault, runtime.SecurityProfile_Unconfined:
	case runtime.SecurityProfile_Localhost:
		p.add("%s (CRI %s: Localhost %q) is a Linux security profile with no Windows equivalent: remove it", field, criField, sp.GetLocalhostRef())
	default:
		p.add("%s (CRI %s) has the unknown profile type %s: remove it", field, criField, sp.GetProfileType())
	}
}

// resourcesFrom records linux.overhead and linux.resources.
func resourcesFrom(l *runtime.LinuxPodSandboxConfig, p *problems) Resources {
	return Resources{
		Overhead: limitsFrom("linux.overhead (the RuntimeClass overhead)", l.GetOverhead(), p),
		Total:    limitsFrom("linux.resources (the sum of the containers' resources)", l.GetResources(), p),
	}
}

func limitsFrom(field string, r *runtime.LinuxContainerResources, p *problems) *Limits {
	if r == nil {
		return nil
	}
	l := &Limits{
		CPUShares:        r.GetCpuShares(),
		CPUQuota:         r.GetCpuQuota(),
		CPUPeriod:        r.GetCpuPeriod(),
		MemoryLimitBytes: r.GetMemoryLimitInBytes(),
	}
	// The CFS quota uses -1 for "no limit".
	if l.CPUShares < 0 || l.CPUQuota < -1 || l.CPUPeriod < 0 || l.MemoryLimitBytes < 0 {
		p.add("CRI %s has a negative CPU or memory figure (cpu_shares %d, cpu_quota %d, cpu_period %d, memory_limit_in_bytes %d)",
			field, l.CPUShares, l.CPUQuota, l.CPUPeriod, l.MemoryLimitBytes)
	}
	if *l == (Limits{}) {
		return nil
	}
	return l
}
