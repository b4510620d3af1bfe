package specconv

import (
	"strconv"
	"strings"

	"github.com/Microsoft/hcsshim/pkg/annotations"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/winproc/winproc/shim/compute"
)

// IsHostProcess reports whether the spec is a HostProcess container's:
// containerd's CRI sets annotation microsoft.com/hostprocess-container to
// the pod's HostProcess flag on the pod's pause container and on every
// container of the pod.
func IsHostProcess(spec *specs.Spec) bool {
	return spec != nil && strings.EqualFold(strings.TrimSpace(spec.Annotations[annotations.HostProcessContainer]), "true")
}

// hostProcessFrom makes s a HostProcess container's settings, refusing
// what a process on the host cannot have: the silo's own network, name,
// identity, devices and dump settings, a named pipe mapped into it, and
// storage limits (the host's disk is not the container's). The init
// process needs an account to run as, unless the container inherits the
// shim's.
func hostProcessFrom(spec *specs.Spec, s *compute.Settings, init *compute.ProcessSettings) error {
	hp := &compute.HostProcess{}
	if v, ok := spec.Annotations[annotations.HostProcessInheritUser]; ok {
		on, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return invalid("annotation %s=%q is not true or false", annotations.HostProcessInheritUser, v)
		}
		hp.InheritUser = on
	}
	const why = "a HostProcess container's processes run on the host, "
	switch {
	case len(s.MappedPipes) > 0:
		return invalid("spec.mounts: %s is mapped as a named pipe, and %sso they reach host pipes directly: remove the mount and open %s", s.MappedPipes[0].HostPath, why, s.MappedPipes[0].HostPath)
	case s.Network.Namespace != "" || len(s.Network.Endpoints) > 0 || s.Network.SharedContainerName != "":
		return invalid("spec.windows.network: %sin the host's network: remove the network namespace and endpoints", why)
	case s.CredentialSpec != "":
		return invalid("spec.windows.credentialSpec: %sas host accounts, without gMSA: remove the credential spec", why)
	case len(s.AssignedDevices) > 0:
		return invalid("spec.windows.devices: %swhere the host's devices are theirs already: remove the devices", why)
	case s.ProcessDumps != nil:
		return invalid("annotation %s: %swhere Windows Error Reporting's own settings apply: remove the dump annotations", annotations.ContainerProcessDumpLocation, why)
	case s.Resources.StorageIOPSMaximum != 0 || s.Resources.StorageBandwidthMaximum != 0:
		return invalid("spec.windows.resources.storage (or its io.microsoft.container.storage.qos annotations): %son the host's disks, which a container's limit does not cover: remove the storage limits", why)
	case init.User == "" && !hp.InheritUser:
		return invalid("spec.process.user.username is empty: %sas a host account; set the pod's or container's securityContext.windowsOptions.runAsUserName (NT AUTHORITY\\SYSTEM, NT AUTHORITY\\LOCAL SERVICE, NT AUTHORITY\\NETWORK SERVICE, a local user or a local group)", why)
	}
	s.HostProcess = hp
	// The host's name is the container's.
	s.HostName = ""
	init.WorkingDirectory = HostProcessWorkingDir(init.WorkingDirectory)
	return nil
}

// hostProcessRoot is where runhcs binds a HostProcess container's rootfs
// on a host with the bind filter, and where containerd's CRI starts its
// processes by default.
const hostProcessRoot = `C:\hpc`

// HostProcessWorkingDir makes C:\hpc, and a path under it, relative: the
// container's rootfs is C:\hpc for its processes on runhcs with the bind
// filter, and winproc's backends put a relative working directory under
// the container's mount point, so C:\hpc\bin means the rootfs's bin
// either way. Other paths are the host's, as given.
func HostProcessWorkingDir(dir string) string {
	d := strings.TrimRight(dir, `\/`)
	switch {
	case strings.EqualFold(d, hostProcessRoot):
		return ""
	case len(d) > len(hostProcessRoot) && strings.EqualFold(d[:len(hostProcessRoot)], hostProcessRoot) && (d[len(hostProcessRoot)] == '\\' || d[len(hostProcessRoot)] == '/'):
		return d[len(hostProcessRoot)+1:]
	}
	return dir
}

// hostProcessMismatch is the error for a container whose kind is not its
// pod's, naming the field to change.
func hostProcessMismatch(podHostProcess bool) error {
	if podHostProcess {
		return invalid("annotation %s is not true, but the container's pod is a HostProcess pod, where every container runs on the host: set the container's securityContext.windowsOptions.hostProcess: true", annotations.HostProcessContainer)
	}
	return invalid("annotation %s=true: a HostProcess container in a pod that is not a HostProcess pod: set the pod's spec.securityContext.windowsOptions.hostProcess: true (and spec.hostNetwork: true), or remove hostProcess from the container", annotations.HostProcessContainer)
}

// CheckPodKind refuses a container whose HostProcess flag is not its
// pod's: containerd's CRI refuses the same, but the task API takes any
// spec.
func CheckPodKind(spec *specs.Spec, podHostProcess bool) error {
	if IsHostProcess(spec) != podHostProcess {
		return hostProcessMismatch(podHostProcess)
	}
	return nil
}
