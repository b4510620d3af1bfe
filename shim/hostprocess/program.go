package hostprocess

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
)

// A HostProcess container's process starts from its command line with no
// shell in between (runhcs puts `cmd /c` in front where the host has the
// bind filter, which hides the program's exit code and a launch failure).
// This file finds the program as CreateProcess would, with the container's
// mount point searched first, so that the program itself is started: its
// exit code is the container's, and a program that is not there fails the
// start, naming it.

// SearchPath is where a program named without a directory is looked for,
// in CreateProcess's order (lpCommandLine's documentation) with the
// container's mount point in the place of the calling program's own
// directory: the mount point, the working directory (CreateProcess's
// current directory), System32, the 16-bit System directory, the Windows
// directory, then PATH's entries (quotes and blanks around them dropped).
func SearchPath(mountPoint, dir, windowsDir, path string) []string {
	dirs := []string{mountPoint, dir, Join(windowsDir, "System32"), Join(windowsDir, "System"), windowsDir}
	for _, p := range strings.Split(path, ";") {
		if p = strings.Trim(strings.TrimSpace(p), `"`); p != "" {
			dirs = append(dirs, p)
		}
	}
	return dirs
}

// Program is the resolved program of a command line: the file to run and
// the command line to give it.
type Program struct {
	Path        string
	CommandLine string
}

// ResolveProgram finds the program a command line runs, as CreateProcess
// does for a NULL application name, and as runhcs's getApplicationName
// (path.go) emulates it:
//
//   - the mount point variable is expanded first;
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
//     looked for under the mount point, then the working directory dir; a
//     bare name in the dirs of search (SearchPath), in order.
//
// isFile reports whether a path is an existing file (not a directory): the
// caller's file system, in which names match without regard to case.
func ResolveProgram(commandLine, mountPoint, dir string, search []string, isFile func(string) bool) (Program, error) {
	line := ExpandMountPoint(commandLine, mountPoint)
	if strings.TrimSpace(line) == "" {
		return Program{}, fmt.Errorf("the command line is empty: name the program to run: %w", errdefs.ErrInvalidArgument)
	}
	if line[0] == '"' {
		end := strings.IndexByte(line[1:], '"')
		if end < 0 {
			return Program{}, fmt.Errorf("command line %q: the program's name has no closing quote: %w", commandLine, errdefs.ErrInvalidArgument)
		}
		name := line[1 : end+1]
		if p, ok := lookProgram(name, mountPoint, dir, search, isFile); ok {
			return Program{Path: p, CommandLine: line}, nil
		}
		return Program{}, notFound(name, commandLine, search)
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
		return Program{Path: p, CommandLine: line}, nil
	}
	return Program{}, notFound(first, commandLine, search)
}

// lookProgram looks for the program name.
func lookProgram(name, mountPoint, dir string, search []string, isFile func(string) bool) (string, bool) {
	var candidates []string
	for _, n := range programCandidates(name) {
		switch {
		case IsAbs(n):
			candidates = append(candidates, n)
		case strings.ContainsAny(n, `\/:`):
			candidates = append(candidates, Join(mountPoint, n), Join(dir, n))
		default:
			for _, d := range search {
				candidates = append(candidates, Join(d, n))
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
// calls it (searchPathForExe), do append it to a full path. So a name with
// a path is tried as written, then with .exe; a bare name only with .exe.
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
	if !IsAbs(name) {
		where = strings.Join(search[:2], " and ")
		if !strings.ContainsAny(name, `\/:`) {
			where = strings.Join(search, "; ")
		}
	}
	return fmt.Errorf("program %q of command line %q not found (looked in %s): put it in the image or name it by its full path: %w", name, commandLine, where, errdefs.ErrNotFound)
}
