//go:build linux

package emulation

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
)

// The container's C: drive is the directory c/ of the system; a Windows
// path on C: names the file below it. Wine looks names up without regard to
// case, so the backend does too: each component matches an existing entry
// of any case, and only a missing one is taken as spelled.

// errNotSupported wraps compute.ErrNotSupported with the reason.
func errNotSupported(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), compute.ErrNotSupported)
}

// errInvalid wraps errdefs.ErrInvalidArgument with the reason.
func errInvalid(format string, a ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), errdefs.ErrInvalidArgument)
}

// cPath parses an absolute Windows path on drive C: (C:\dir\file, forward
// slashes allowed, \\?\ accepted) into its components, with . and ..
// resolved (.. stops at the root). Other drives, UNC paths and relative
// paths are errors: the emulation has drive C: only.
func cPath(p string) ([]string, error) {
	orig := p
	p = strings.TrimPrefix(p, `\\?\`)
	if strings.HasPrefix(p, `\\`) || strings.HasPrefix(p, `//`) {
		return nil, errNotSupported("%q: UNC paths are not supported by the Wine emulation, which has drive C: only", orig)
	}
	if len(p) < 2 || p[1] != ':' || !isLetter(p[0]) {
		return nil, errInvalid("%q is not an absolute Windows path (C:\\...)", orig)
	}
	if p[0] != 'c' && p[0] != 'C' {
		return nil, errNotSupported("%q: drive %c: is not supported by the Wine emulation, which has drive C: only", orig, p[0])
	}
	rest := p[2:]
	if rest != "" && rest[0] != '\\' && rest[0] != '/' {
		return nil, errInvalid("%q is a drive-relative path; give an absolute path (C:\\...)", orig)
	}
	var comps []string
	for _, c := range strings.FieldsFunc(rest, func(r rune) bool { return r == '\\' || r == '/' }) {
		switch c {
		case ".":
		case "..":
			if len(comps) > 0 {
				comps = comps[:len(comps)-1]
			}
		default:
			comps = append(comps, c)
		}
	}
	return comps, nil
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// winJoin is the Windows path C:\comps...
func winJoin(comps []string) string { return `C:\` + strings.Join(comps, `\`) }

// lookupFold finds the entry of dir named name, ignoring case: the exact
// name when it exists, else the first entry equal to it under case folding.
func lookupFold(dir, name string) (string, bool) {
	if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
		return name, true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", false
	}
	for _, e := range entries {
		if strings.EqualFold(e.Name(), name) {
			return e.Name(), true
		}
	}
	return "", false
}

// resolve maps components below root to the existing path, matching case
// as Wine does. It returns the components as found (their real case) and
// fs.ErrNotExist when one is missing.
func resolve(root string, comps []string) ([]string, error) {
	real := make([]string, 0, len(comps))
	cur := root
	for _, c := range comps {
		name, ok := lookupFold(cur, c)
		if !ok {
			return nil, fs.ErrNotExist
		}
		real = append(real, name)
		cur = filepath.Join(cur, name)
	}
	return real, nil
}

// mkdirFold creates the directories comps below root as needed (matching
// existing ones without regard to case), or with lastIsFile an empty file
// as the last, and returns the Linux path. Every step must stay below root
// after symlinks are resolved, checked before anything is created there:
// the backend mounts on the result.
func mkdirFold(root string, comps []string, lastIsFile bool) (string, error) {
	rootReal, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	cur := rootReal
	for i, c := range comps {
		name, ok := lookupFold(cur, c)
		if !ok {
			name = c
			p := filepath.Join(cur, name)
			if lastIsFile && i == len(comps)-1 {
				var f *os.File
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY|unix.O_NOFOLLOW, 0o644); err == nil {
					err = f.Close()
				}
			} else {
				err = os.Mkdir(p, 0o755)
			}
			if err != nil && !errors.Is(err, fs.ErrExist) {
				return "", err
			}
		}
		next, err := filepath.EvalSymlinks(filepath.Join(cur, name))
		if err != nil {
			return "", err
		}
		if next != rootReal && !strings.HasPrefix(next, rootReal+"/") {
			return "", errInvalid("%s leads out of the container's C: drive (to %s) through a symbolic link", winJoin(comps[:i+1]), next)
		}
		cur = next
	}
	return cur, nil
}

// wineWindowsDir is a Wine prefix's Windows directory.
const wineWindowsDir = `C:\windows`

// defaultWinePath is the Windows PATH a Wine prefix gives its processes
// (from the registry) when the spec sets none.
const defaultWinePath = `C:\windows\system32;C:\windows;C:\windows\system32\wbem;C:\windows\system32\WindowsPowershell\v1.0`

// resolveProgram finds the executable a Windows command line names, the
// way CreateProcess does for its lpCommandLine: ".exe" is appended to a
// name without an extension; a name with a directory is taken relative to
// cwd (or the drive root for \dir\name); a bare name is searched for in
// the working directory, C:\windows\system32, C:\windows and then the
// directories of path. It returns the Windows path in the case found on
// disk. A HostProcess container's processes are found by
// hostProcessProgram instead, by the rules both HostProcess backends share.
//
// The backend passes that full path to wine: given a bare name, wine would
// otherwise run start.exe /exec to search for the program, and the process
// the backend starts (and signals) would be start.exe, not the program.
func resolveProgram(cdir, name string, cwd []string, path string) (string, error) {
	base := name
	if i := strings.LastIndexAny(base, `\/`); i >= 0 {
		base = base[i+1:]
	}
	if base == "" {
		return "", errInvalid("command line names the program %q, a directory", name)
	}
	try := func(comps []string) (string, bool) {
		if !strings.Contains(comps[len(comps)-1], ".") {
			withExe := append(append([]string(nil), comps[:len(comps)-1]...), comps[len(comps)-1]+".exe")
			if real, err := resolve(cdir, withExe); err == nil && isFile(filepath.Join(append([]string{cdir}, real...)...)) {
				return winJoin(real), true
			}
		}
		if real, err := resolve(cdir, comps); err == nil && isFile(filepath.Join(append([]string{cdir}, real...)...)) {
			return winJoin(real), true
		}
		return "", false
	}
	var searched []string
	absolute := len(name) >= 2 && name[1] == ':' || strings.HasPrefix(name, `\\`)
	switch {
	case absolute, strings.ContainsAny(name, `\/`):
		full := name
		switch {
		case absolute:
		case name[0] == '\\' || name[0] == '/':
			full = winJoin(nil) + `\` + name // the drive's root
		default:
			full = winJoin(cwd) + `\` + name
		}
		comps, err := cPath(full)
		if err != nil {
			return "", fmt.Errorf("program: %w", err)
		}
		if len(comps) == 0 {
			return "", errInvalid("command line names the program %q, a directory", name)
		}
		if p, ok := try(comps); ok {
			return p, nil
		}
		searched = append(searched, winJoin(comps))
	default:
		dirs := [][]string{cwd, {"windows", "system32"}, {"windows"}}
		for _, d := range strings.Split(path, ";") {
			d = strings.Trim(strings.TrimSpace(d), `"`)
			if d == "" {
				continue
			}
			comps, err := cPath(d)
			if err != nil {
				continue // another drive, or not a path: nothing there
			}
			dirs = append(dirs, comps)
		}
		for _, d := range dirs {
			comps := append(append([]string(nil), d...), name)
			if p, ok := try(comps); ok {
				return p, nil
			}
			searched = append(searched, winJoin(d))
		}
	}
	return "", errInvalid("program %q not found in the container (looked in %s)", name, strings.Join(searched, "; "))
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// wineReserved are Windows environment variables a Wine process cannot
// receive through its Unix environment: Wine sets them itself (PWD, HOME,
// TEMP and TMP come from the prefix's registry and user profile; Unix
// values of these names are ignored).
var wineReserved = []string{"PWD", "HOME", "TEMP", "TMP"}

// processEnv builds the Unix environment of a Wine process from the
// spec's environment, later entries replacing earlier ones of the same name
// ignoring case, as on Windows:
//
//   - the base is PATH and HOME of the shim (Wine's own needs: they do not
//     reach the Windows environment) and LANG=C.UTF-8, so Wine maps Unix
//     file names as UTF-8 (a spec LANG or LC_ALL replaces it; LANG does
//     show in the Windows environment);
//   - PATH (any case) becomes WINEPATH, which Wine puts in front of the
//     prefix's PATH (C:\windows\system32;C:\windows;...): the Windows PATH
//     is built from the registry, and a Unix PATH of Windows directories
//     would break finding wine;
//   - PWD, HOME, TEMP and TMP are dropped (Wine ignores them and sets its
//     own), as are names starting with WINE (Wine's own settings) and LD_
//     (the Linux dynamic loader's);
//   - WINEPREFIX, WINEDEBUG=-all and WINEDLLOVERRIDES come last.
//
// It also returns the effective Windows PATH for the program search.
func processEnv(spec []string, prefix string) (env []string, winPath string) {
	type kv struct{ name, value string }
	var vars []kv
	index := map[string]int{}
	for _, e := range spec {
		name, value, ok := strings.Cut(e, "=")
		if !ok || name == "" {
			continue // not NAME=VALUE, or a hidden =C: variable
		}
		key := strings.ToUpper(name)
		if i, ok := index[key]; ok {
			vars[i] = kv{name, value}
			continue
		}
		index[key] = len(vars)
		vars = append(vars, kv{name, value})
	}

	env = baseEnv()
	if _, ok := index["LANG"]; !ok {
		if _, ok := index["LC_ALL"]; !ok {
			env = append(env, "LANG=C.UTF-8")
		}
	}
	winPath = defaultWinePath
	var winePath string
outer:
	for _, v := range vars {
		key := strings.ToUpper(v.name)
		switch {
		case key == "PATH":
			winePath = v.value
			winPath = v.value + ";" + defaultWinePath
			continue
		case strings.HasPrefix(key, "WINE"), strings.HasPrefix(key, "LD_"):
			continue
		}
		for _, r := range wineReserved {
			if key == r {
				continue outer
			}
		}
		env = append(env, v.name+"="+v.value)
	}
	if winePath != "" {
		env = append(env, "WINEPATH="+winePath)
	}
	return append(env, wineEnv(prefix)...), winPath
}

// wineEnv are the Wine settings of every process of a silo: its prefix,
// quiet, without the Mono and Gecko installers, and without
// winemenubuilder (desktop integration, of no use in a container).
func wineEnv(prefix string) []string {
	return []string{
		"WINEPREFIX=" + prefix,
		"WINEDEBUG=-all",
		"WINEDLLOVERRIDES=mscoree,mshtml=;winemenubuilder.exe=d",
	}
}

// baseEnv is the Unix environment Wine itself needs (not passed to Windows
// programs: Wine ignores PATH and HOME there).
func baseEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	home := os.Getenv("HOME")
	if home == "" {
		home = "/root"
	}
	return []string{"PATH=" + path, "HOME=" + home}
}
