// Package hostprocess holds the rules of a HostProcess container's process
// that are Windows' and runhcs's, not a backend's: the mount point
// variable's expansion, the working directory, the environment, the
// program a command line names and the account a process runs as. Both
// backends that run HostProcess containers use them: shim/jobcontainer on
// Windows and shim/emulation under Wine. It is pure Go, built and tested on
// every platform; each rule cites the Windows documentation or the
// hcsshim v0.15.0 file and function (internal/jobcontainers) it follows.
package hostprocess

import (
	"strings"

	"github.com/winproc/winproc/shim/compute"
)

// ExpandMountPoint replaces %CONTAINER_SANDBOX_MOUNT_POINT% and
// $env:CONTAINER_SANDBOX_MOUNT_POINT with the mount point, as runhcs does in
// command lines, working directories and environment values
// (jobcontainer.go, replaceWithMountPoint): pod specs name their programs
// so ("%CONTAINER_SANDBOX_MOUNT_POINT%\agent.exe"), and no shell expands
// them here. Any letter case matches: runhcs's own replacement is
// case-sensitive, but with the bind filter it runs every command line
// through `cmd /c`, which expands %container_sandbox_mount_point% from the
// environment in any case, as PowerShell reads $env: names.
func ExpandMountPoint(s, mountPoint string) string {
	for _, v := range []string{"%" + compute.SandboxMountPointEnv + "%", "$env:" + compute.SandboxMountPointEnv} {
		for {
			i := strings.Index(strings.ToUpper(s), strings.ToUpper(v))
			if i < 0 {
				break
			}
			s = s[:i] + mountPoint + s[i+len(v):]
		}
	}
	return s
}

// IsAbs reports whether p is a full Windows path: C:\x, or \\server\share
// and \\?\ paths. A drive-relative path (C:x) is not: CreateProcess takes
// only a full path for its current directory (lpCurrentDirectory).
func IsAbs(p string) bool {
	return strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, `//`) ||
		(len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/'))
}

// Join joins a Windows directory and a relative path, without a separator
// at the end.
func Join(dir, rel string) string {
	dir = strings.TrimRight(dir, `\/`)
	rel = strings.Trim(rel, `\/`)
	if rel == "" {
		return dir
	}
	return dir + `\` + rel
}

// WorkingDirectory is where a process runs: "" and a relative directory
// under the mount point (the image's files are there, as runhcs joins them
// in CreateProcess), a full path the host's; the mount point variable is
// expanded first.
func WorkingDirectory(wd, mountPoint string) string {
	wd = ExpandMountPoint(wd, mountPoint)
	if IsAbs(wd) {
		return wd
	}
	return Join(mountPoint, wd)
}
