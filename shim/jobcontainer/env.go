package jobcontainer

import (
	"strings"

	"github.com/winproc/winproc/shim/compute"
)

// environment is a process's environment: its user's profile (what
// CreateEnvironmentBlock gives for its token), then the spec's entries over
// it (later ones win, names compared without case, as Windows compares
// them; NAME= removes a variable), then CONTAINER_SANDBOX_MOUNT_POINT, and
// the mount point at the front of PATH with PowerShell's and WMI's
// directories at its end when missing (runhcs adds them: images built for
// HostProcess call powershell by name).
//
// The variable and the PATH additions come after the spec's entries, as in
// runhcs: every Windows image's config carries a PATH, which containerd
// puts in the spec, and it would otherwise drop the mount point. Spec
// values may name %CONTAINER_SANDBOX_MOUNT_POINT%, which is expanded.
func environment(profile, spec []string, mountPoint, windowsDir string) envList {
	var env envList
	for _, kv := range profile {
		env.set(kv)
	}
	for _, kv := range spec {
		env.set(expandMountPoint(kv, mountPoint))
	}
	env.set(compute.SandboxMountPointEnv + "=" + mountPoint + `\`)
	path, _ := env.get("PATH")
	dirs := []string{mountPoint}
	for _, d := range strings.Split(path, ";") {
		if d != "" && !strings.EqualFold(strings.TrimRight(d, `\`), mountPoint) {
			dirs = append(dirs, d)
		}
	}
	for _, extra := range []string{join(windowsDir, `System32\WindowsPowerShell\v1.0`), join(windowsDir, `System32\Wbem`)} {
		if !containsDir(dirs, extra) {
			dirs = append(dirs, extra)
		}
	}
	env.set("PATH=" + strings.Join(dirs, ";"))
	return env
}

func containsDir(dirs []string, d string) bool {
	for _, x := range dirs {
		if strings.EqualFold(strings.TrimRight(x, `\`), d) {
			return true
		}
	}
	return false
}

// envList is an environment, NAME=VALUE each, one entry per name compared
// without case.
type envList []string

// set adds or replaces kv's variable, keeping the new entry's spelling of
// the name; NAME= removes it. An entry without '=' is ignored.
func (e *envList) set(kv string) {
	name, value, ok := strings.Cut(kv, "=")
	if !ok || name == "" {
		// Windows keeps per-drive directories as "=C:=C:\x"; they have no
		// meaning in a new process's block either way.
		return
	}
	out := (*e)[:0]
	for _, x := range *e {
		if n, _, _ := strings.Cut(x, "="); !strings.EqualFold(n, name) {
			out = append(out, x)
		}
	}
	if value != "" {
		out = append(out, kv)
	}
	*e = out
}

func (e envList) get(name string) (string, bool) {
	for _, x := range e {
		if n, v, _ := strings.Cut(x, "="); strings.EqualFold(n, name) {
			return v, true
		}
	}
	return "", false
}
