package hostprocess

import (
	"strings"

	"github.com/winproc/winproc/shim/compute"
)

// Environment is a process's environment: base (the user's profile, what
// CreateEnvironmentBlock gives for its token, as runhcs's defaultEnvBlock;
// nil where the platform builds it itself), then the spec's entries over it,
// their mount point variable expanded, then CONTAINER_SANDBOX_MOUNT_POINT
// (the mount point with runhcs's trailing backslash), and PATH with the
// mount point in front and PowerShell's and WMI's directories at its end
// when missing (runhcs adds them: images built for HostProcess call
// powershell by name).
//
// As in runhcs's CreateProcess (jobcontainer.go), the variable and the
// PATH additions come after the spec's entries: every Windows image's
// config carries a PATH, which containerd puts in the spec, and it would
// otherwise drop the mount point. Unlike runhcs, which appends it, the
// mount point comes first in PATH, so that the image's programs win over
// the host's of the same name, as its working directory and search order do.
// windowsDir is the Windows directory (GetWindowsDirectory).
func Environment(base, spec []string, mountPoint, windowsDir string) Env {
	var env Env
	for _, kv := range base {
		env.Set(kv)
	}
	for _, kv := range spec {
		env.Set(ExpandMountPoint(kv, mountPoint))
	}
	env.Set(compute.SandboxMountPointEnv + "=" + mountPoint + `\`)
	path, _ := env.Get("PATH")
	dirs := []string{mountPoint}
	for _, d := range strings.Split(path, ";") {
		if d != "" && !strings.EqualFold(strings.TrimRight(d, `\`), mountPoint) {
			dirs = append(dirs, d)
		}
	}
	for _, extra := range []string{Join(windowsDir, `System32\WindowsPowerShell\v1.0`), Join(windowsDir, `System32\Wbem`)} {
		if !containsDir(dirs, extra) {
			dirs = append(dirs, extra)
		}
	}
	env.Set("PATH=" + strings.Join(dirs, ";"))
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

// Env is an environment, NAME=VALUE each, one entry per name compared
// without case, as Windows compares them.
type Env []string

// Set adds or replaces kv's variable, keeping the new entry's spelling of
// the name. NAME= sets an empty value, as runhcs passes it (hcsshim
// internal/exec, dedupEnvCase and createEnvBlock keep it). An entry without
// '=' is ignored.
func (e *Env) Set(kv string) {
	name, _, ok := strings.Cut(kv, "=")
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
	*e = append(out, kv)
}

// Get is the value of variable name, and whether it is set.
func (e Env) Get(name string) (string, bool) {
	for _, x := range e {
		if n, v, _ := strings.Cut(x, "="); strings.EqualFold(n, name) {
			return v, true
		}
	}
	return "", false
}
