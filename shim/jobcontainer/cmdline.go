package jobcontainer

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"

	"github.com/winproc/winproc/shim/compute"
)

// A HostProcess container's process starts from its command line with no
// shell in between (runhcs puts `cmd /c` in front, which hides the
// program's exit code and a launch failure). This file finds the program
// as CreateProcess would, with the container's mount point searched first,
// so that the program itself is started: its exit code is the container's,
// and a program that is not there fails the start, naming it.

// expandMountPoint replaces %CONTAINER_SANDBOX_MOUNT_POINT% and
// $env:CONTAINER_SANDBOX_MOUNT_POINT (in any letter case, as cmd and
// PowerShell read them) with the mount point, as runhcs does in command
// lines, working directories and environment values: pod specs name their
// programs so ("%CONTAINER_SANDBOX_MOUNT_POINT%\agent.exe"), and no shell
// expands them here.
func expandMountPoint(s, mountPoint string) string {
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

// isAbs reports whether p is a full Windows path: C:\x, or \\server\share
// and \\?\ paths.
func isAbs(p string) bool {
	return strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, `//`) ||
		(len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/'))
}

// join joins a Windows directory and a relative path, without a
// separator at the end.
func join(dir, rel string) string {
	dir = strings.TrimRight(dir, `\/`)
	rel = strings.Trim(rel, `\/`)
	if rel == "" {
		return dir
	}
	return dir + `\` + rel
}

// workingDirectory is where a process runs: a relative directory, and "",
// under the mount point (the image's files are there); a full path is the
// host's.
func workingDirectory(wd, mountPoint string) string {
	wd = expandMountPoint(wd, mountPoint)
	if isAbs(wd) {
		return wd
	}
	return join(mountPoint, wd)
}

// searchPath is where a program named without a directory is looked for,
// in CreateProcess's order with the container's mount point in the place
// of the calling program's own directory: the mount point, the working
// directory (CreateProcess's current directory), System32, the 16-bit
// System directory, the Windows directory, then PATH.
func searchPath(mountPoint, dir, windowsDir, path string) []string {
	dirs := []string{mountPoint, dir, join(windowsDir, "System32"), join(windowsDir, "System"), windowsDir}
	for _, p := range strings.Split(path, ";") {
		if p = strings.Trim(strings.TrimSpace(p), `"`); p != "" {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// program is the resolved program of a command line: the file to run and
// the command line to give it.
type program struct {
	path        string
	commandLine string
}

// resolveProgram finds the program a command line runs, as CreateProcess
// does for a NULL application name:
//
//   - a command line that starts with a quote names the program up to the
//     next quote;
//   - otherwise the program is the line up to the first space or tab; if
//     no such file exists, up to the second, and so on (C:\Program
//     Files\x.exe), and the name found is quoted in the command line the
//     program gets, so that its own parsing agrees;
//   - the extension (programCandidates): a bare name without one gets
//     .exe, a trailing dot meaning none; a name with a path is taken as
//     written first, so that a program without an extension (agnhost, as
//     Kubernetes' images ship it) starts, then with .exe;
//   - a full path is taken as is; a relative path with a directory is
//     looked for under the mount point, then the working directory; a bare
//     name in the dirs of searchPath, in order.
//
// isFile reports whether a path is an existing file (not a directory).
func resolveProgram(commandLine string, mountPoint, dir string, search []string, isFile func(string) bool) (program, error) {
	line := expandMountPoint(commandLine, mountPoint)
	if strings.TrimSpace(line) == "" {
		return program{}, invalid("the command line is empty: name the program to run")
	}
	if line[0] == '"' {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return program{}, invalid("command line %q: the program's name has no closing quote", commandLine)
		}
		name := line[1 : end+1]
		if p, ok := lookProgram(name, mountPoint, dir, search, isFile); ok {
			return program{path: p, commandLine: line}, nil
		}
		return program{}, notFound(name, commandLine, search)
	}
	first := ""
	for i := 0; i <= len(line); i++ {
		if i < len(line) && line[i] != ' ' && line[i] != '\t' {
			continue
		}
		if i == 0 || line[i-1] == ' ' || line[i-1] == '\t' {
			continue
		}
		name := line[:i]
		if first == "" {
			first = name
		}
		p, ok := lookProgram(name, mountPoint, dir, search, isFile)
		if !ok {
			continue
		}
		if strings.ContainsAny(name, " \t") {
			line = `"` + name + `"` + line[i:]
		}
		return program{path: p, commandLine: line}, nil
	}
	return program{}, notFound(first, commandLine, search)
}

// lookProgram looks for the program name.
func lookProgram(name, mountPoint, dir string, search []string, isFile func(string) bool) (string, bool) {
	var candidates []string
	for _, n := range programCandidates(name) {
		switch {
		case isAbs(n):
			candidates = append(candidates, n)
		case strings.ContainsAny(n, `\/:`):
			candidates = append(candidates, join(mountPoint, n), join(dir, n))
		default:
			for _, d := range search {
				candidates = append(candidates, join(d, n))
			}
		}
	}
	for _, c := range candidates {
		if isFile(c) {
			return c, true
		}
	}
	return "", false
}

// programCandidates are the file names a program's name may stand for,
// in order. CreateProcess's documentation (lpCommandLine) appends .exe to
// a name without an extension, but not to one that ends in a period or
// "contains a path"; its own example, and SearchPathW's ".exe" as runhcs
// calls it (hcsshim internal/jobcontainers searchPathForExe), do append
// it to a full path. So a name with a path is tried as written, then with
// .exe; a bare name only with .exe.
func programCandidates(name string) []string {
	last := name[strings.LastIndexAny(name, `\/:`)+1:]
	switch {
	case strings.HasSuffix(last, "."):
		return []string{strings.TrimRight(name, ".")}
	case strings.Contains(last, "."):
		return []string{name}
	case strings.ContainsAny(name, `\/:`):
		return []string{name, name + ".exe"}
	}
	return []string{name + ".exe"}
}

// notFound is the error for a program that is not there, naming it and
// where it was looked for.
func notFound(name, commandLine string, search []string) error {
	where := "its path"
	if !isAbs(name) {
		where = strings.Join(search[:2], " and ")
		if !strings.ContainsAny(name, `\/:`) {
			where = strings.Join(search, "; ")
		}
	}
	return fmt.Errorf("program %q of command line %q not found (looked in %s): put it in the image or name it by its full path: %w", name, commandLine, where, errdefs.ErrNotFound)
}
