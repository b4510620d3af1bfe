package layertar

import (
	"strings"
	"unicode/utf8"

	"github.com/winproc/winproc/snapshotter/layermount"
)

const (
	whiteoutPrefix = ".wh."
	// opaqueWhiteout is the OCI marker making its directory opaque.
	opaqueWhiteout = whiteoutPrefix + whiteoutPrefix + ".opq"

	// maxNameLen bounds an entry name; it is the longest path Windows
	// supports (32767 UTF-16 units), which also bounds the directory depth.
	maxNameLen = 32767
)

// entryPath is a validated entry name, relative to the layer directory.
type entryPath struct {
	rel    string // e.g. "Files/Windows/win.ini"
	parent string // rel of the parent directory, "" for a top-level entry
	base   string // last component
	top    string // first component: Files, Hives or UtilityVM
	// For an alternate data stream "file:stream", adsBase is "file".
	adsBase string
}

func joinRel(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// splitRel splits "a/b/c" into "a/b" and "c".
func splitRel(rel string) (string, string) {
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		return rel[:i], rel[i+1:]
	}
	return "", rel
}

func isDriveLetterPath(name string) bool {
	if len(name) < 2 || name[1] != ':' {
		return false
	}
	c := name[0] | 0x20
	return c >= 'a' && c <= 'z'
}

// parseEntryName validates a tar entry name (or hard link target). skip is
// true for the archive root ("." or "./"), which carries nothing to import.
func parseEntryName(name string) (p entryPath, skip bool, err error) {
	switch {
	case name == "":
		return p, false, errorf(ErrInvalidEntry, "empty name")
	case len(name) > maxNameLen:
		return p, false, errorf(ErrInvalidEntry, "name longer than %d bytes", maxNameLen)
	case !utf8.ValidString(name):
		return p, false, errorf(ErrInvalidEntry, "name is not valid UTF-8")
	case strings.IndexByte(name, 0) >= 0:
		return p, false, errorf(ErrInvalidEntry, "name contains NUL")
	case strings.IndexByte(name, '\\') >= 0:
		return p, false, errorf(ErrUnsafePath, "name contains a backslash")
	case isDriveLetterPath(name):
		return p, false, errorf(ErrUnsafePath, "drive-letter path")
	case name[0] == '/':
		return p, false, errorf(ErrUnsafePath, "absolute path")
	}
	for strings.HasPrefix(name, "./") {
		name = name[2:]
	}
	name = strings.TrimRight(name, "/")
	if name == "" || name == "." {
		return p, true, nil
	}
	parts := strings.Split(name, "/")
	for i, c := range parts {
		switch {
		case c == "":
			return p, false, errorf(ErrUnsafePath, "empty path component")
		case c == "..":
			return p, false, errorf(ErrUnsafePath, "\"..\" component")
		case c == ".":
			return p, false, errorf(ErrUnsafePath, "\".\" component")
		case i != len(parts)-1 && strings.HasPrefix(c, whiteoutPrefix):
			return p, false, errorf(ErrInvalidEntry, "whiteout name %q used as a directory", c)
		case strings.IndexByte(c, ':') >= 0:
			if i != len(parts)-1 {
				return p, false, errorf(ErrUnsafePath, "':' in directory component %q", c)
			}
			file, stream, _ := strings.Cut(c, ":")
			if file == "" || stream == "" || strings.IndexByte(stream, ':') >= 0 {
				return p, false, errorf(ErrUnsafePath, "invalid ':' in %q (drive letter or malformed alternate data stream)", c)
			}
			p.adsBase = file
		}
	}
	p.top = parts[0]
	if p.top != layermount.FilesDir && p.top != layermount.HivesDir && p.top != layermount.UtilityVMDir {
		return p, false, errorf(ErrUnsafePath, "outside Files/, Hives/ and UtilityVM/")
	}
	p.rel = name
	p.parent, p.base = splitRel(name)
	return p, false, nil
}

// convertLinkTarget validates a symlink target and returns the form stored
// on disk: '/' replaced by '\', so that the link is a single component on
// Linux and cannot resolve outside its directory.
func convertLinkTarget(target string) (string, error) {
	switch {
	case target == "":
		return "", errorf(ErrInvalidEntry, "empty symlink target")
	case len(target) > maxNameLen:
		return "", errorf(ErrInvalidEntry, "symlink target longer than %d bytes", maxNameLen)
	case !utf8.ValidString(target):
		return "", errorf(ErrInvalidEntry, "symlink target is not valid UTF-8")
	case strings.IndexByte(target, 0) >= 0:
		return "", errorf(ErrInvalidEntry, "symlink target contains NUL")
	}
	t := strings.ReplaceAll(target, "/", `\`)
	if t == "." || t == ".." {
		return "", errorf(ErrUnsafePath, "symlink target %q", target)
	}
	return t, nil
}

// checkDiskName validates the name of a file found while exporting a tree.
func checkDiskName(name string) error {
	switch {
	case !utf8.ValidString(name):
		return errorf(ErrInvalidEntry, "name is not valid UTF-8")
	case strings.IndexByte(name, '\\') >= 0:
		return errorf(ErrInvalidEntry, "name contains a backslash, which Windows cannot represent")
	case strings.HasPrefix(name, whiteoutPrefix):
		return errorf(ErrInvalidEntry, "file name starts with %q, which the layer format reserves for whiteouts", whiteoutPrefix)
	}
	return nil
}
