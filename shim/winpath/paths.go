package winpath

import (
	"errors"
	"strings"
)

// PipePrefix starts every local named pipe path, in any letter case.
const PipePrefix = `\\.\pipe\`

// PipeName is the name of the named pipe p, `\\.\pipe\NAME` (the prefix in
// any letter case), and whether p is one.
func PipeName(p string) (string, bool) {
	if len(p) < len(PipePrefix) || !strings.EqualFold(p[:len(PipePrefix)], PipePrefix) {
		return "", false
	}
	return p[len(PipePrefix):], true
}

func isDriveLetter(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// IsAbsHostPath reports whether p is an absolute path on the host: a
// Windows drive path (C:\x or C:/x), a UNC or device path (\\server\share,
// \\?\C:\x) or, for the Linux emulation, a POSIX path (/x).
func IsAbsHostPath(p string) bool {
	switch {
	case strings.HasPrefix(p, "/"), strings.HasPrefix(p, `\\`):
		return true
	case len(p) >= 3 && isDriveLetter(p[0]) && p[1] == ':' && (p[2] == '\\' || p[2] == '/'):
		return true
	}
	return false
}

// ContainerPath normalises an absolute path inside the container: the drive
// letter in upper case, backslashes, no empty, "." or ".." elements and no
// trailing separator, so C:/data/./x/ becomes C:\data\x. A drive alone (D:
// or D:\) is D:, a whole drive mapped into the container; the system drive
// C: itself cannot be a mount destination. The error says what is wrong
// with p, for the caller to prefix with the field name.
func ContainerPath(p string) (string, error) {
	if len(p) < 2 || !isDriveLetter(p[0]) || p[1] != ':' {
		return "", errors.New(`is not an absolute Windows path with a drive letter, such as C:\data`)
	}
	drive := strings.ToUpper(p[:1]) + ":"
	rest := strings.ReplaceAll(p[2:], "/", `\`)
	if rest != "" && rest[0] != '\\' {
		return "", errors.New(`is relative to the current directory of drive ` + drive + `; write it as ` + drive + `\` + rest)
	}
	var elems []string
	for _, e := range strings.Split(rest, `\`) {
		switch e {
		case "", ".":
		case "..":
			if len(elems) == 0 {
				return "", errors.New("climbs above the root of drive " + drive)
			}
			elems = elems[:len(elems)-1]
		default:
			if i := strings.IndexFunc(e, invalidPathRune); i >= 0 {
				return "", errors.New("contains " + quoteRune(rune(e[i])) + ", which Windows does not allow in a file name")
			}
			elems = append(elems, e)
		}
	}
	if len(elems) == 0 {
		if drive == "C:" {
			return "", errors.New(`is the root of the container's system drive C:\, which holds the image and cannot be mapped over`)
		}
		return drive, nil
	}
	return drive + `\` + strings.Join(elems, `\`), nil
}

// invalidPathRune reports the characters Windows refuses in a path element.
func invalidPathRune(r rune) bool {
	return r < 0x20 || strings.ContainsRune(`<>:"|?*`, r)
}

func quoteRune(r rune) string {
	if r < 0x20 {
		return "a control character"
	}
	return "'" + string(r) + "'"
}

// SystemDrivePath maps an absolute Windows path on drive C: to its components
// below C:\, e.g. `C:\Windows\System32\wincat.exe` to [Windows System32
// wincat.exe]. '/' counts as '\' (as Windows takes it), a path rooted
// without a drive (`\pause.exe`, `/pause.exe`) is on C:, and "." and ".."
// are resolved lexically. It reports false for what is not such a path:
// bare or relative names, other drives, UNC paths.
func SystemDrivePath(p string) ([]string, bool) {
	p = strings.ReplaceAll(p, "/", `\`)
	for _, prefix := range []string{`\\?\`, `\??\`} {
		if strings.HasPrefix(p, prefix) {
			p = p[len(prefix):]
			break
		}
	}
	switch {
	case len(p) >= 2 && p[1] == ':':
		if p[0] != 'C' && p[0] != 'c' {
			return nil, false
		}
		p = p[2:]
		if !strings.HasPrefix(p, `\`) {
			return nil, false // drive-relative
		}
	case strings.HasPrefix(p, `\\`):
		return nil, false // UNC
	case !strings.HasPrefix(p, `\`):
		return nil, false
	}
	var components []string
	for _, c := range strings.Split(p, `\`) {
		switch c {
		case "", ".":
		case "..":
			if len(components) > 0 {
				components = components[:len(components)-1]
			}
		default:
			components = append(components, c)
		}
	}
	return components, len(components) > 0
}
