package doctor

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/winproc/winproc/snapshotter/layermount"
)

// FileState is what the layers of an image say about a file.
type FileState int

const (
	// FileAbsent: no layer has the file, or a layer above the one that
	// has it deletes it (or puts a directory there, or a file in place of
	// a directory on its path).
	FileAbsent FileState = iota
	// FilePresent: the topmost layer that decides has the file.
	FilePresent
	// FileUnknown: a link on the file's path (a reparse point) leaves the
	// answer to the running system.
	FileUnknown
)

func (s FileState) String() string {
	switch s {
	case FilePresent:
		return "present"
	case FileUnknown:
		return "unknown"
	}
	return "absent"
}

const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = whiteoutPrefix + whiteoutPrefix + ".opq"
)

// LayerOpener opens the uncompressed tar stream of layer i of n (0 is the
// base layer, n-1 the top).
type LayerOpener func(i int) (io.ReadCloser, error)

// FindFiles looks up files in the union of Windows-format layer tars (as
// go-winio's backuptar writes them: the C:\ tree under Files/, '/'
// separators). paths are relative to C:\ with '/' separators, e.g.
// "Windows/System32/wincat.exe", and match case-insensitively, as Windows
// names do.
//
// Layers are read from the top down, each at most once, and reading stops
// as soon as every path is decided, so a large base layer below the layer
// that has the files is never read. In a layer, a non-directory at the path
// decides FilePresent (whatever the layer deletes applies to the layers
// below it only); otherwise a ".wh.<name>" whiteout of the path or of a
// directory on it, an opaque-directory marker (".wh..wh..opq") in a
// directory on it, a directory at the path or a file in place of a directory
// on it decides FileAbsent. Alternate data streams ("file:stream") and
// everything outside Files/ are ignored.
func FindFiles(n int, open LayerOpener, paths []string) (map[string]FileState, error) {
	want := make(map[string][]string, len(paths))
	for _, p := range paths {
		want[p] = splitLower(p)
	}
	result := make(map[string]FileState, len(paths))
	for i := n - 1; i >= 0 && len(want) > 0; i-- {
		decided, err := scanLayer(i, open, want)
		if err != nil {
			return nil, err
		}
		for p, st := range decided {
			result[p] = st
			delete(want, p)
		}
	}
	for p := range want {
		result[p] = FileAbsent
	}
	return result, nil
}

func splitLower(p string) []string {
	var out []string
	for _, c := range strings.Split(strings.ToLower(strings.ReplaceAll(p, `\`, "/")), "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// hasPrefix reports whether prefix is a prefix of path (or equal).
func hasPrefix(path, prefix []string) bool {
	if len(prefix) > len(path) {
		return false
	}
	for i := range prefix {
		if path[i] != prefix[i] {
			return false
		}
	}
	return true
}

// scanLayer reads layer i and returns the paths it decides.
func scanLayer(i int, open LayerOpener, want map[string][]string) (map[string]FileState, error) {
	rc, err := open(i)
	if err != nil {
		return nil, fmt.Errorf("layer %d: %w", i, err)
	}
	defer rc.Close()
	present := map[string]bool{}
	hidden := map[string]bool{}
	unknown := map[string]bool{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("layer %d: read tar: %w", i, err)
		}
		name := strings.TrimRight(strings.TrimPrefix(h.Name, "./"), "/")
		top, rel, ok := strings.Cut(name, "/")
		if !ok || !strings.EqualFold(top, layermount.FilesDir) || rel == "" {
			continue
		}
		comps := splitLower(rel)
		if len(comps) == 0 || strings.Contains(comps[len(comps)-1], ":") {
			continue // an alternate data stream
		}
		base := comps[len(comps)-1]
		parent := comps[:len(comps)-1]
		for p, target := range want {
			switch {
			case base == opaqueWhiteout:
				if hasPrefix(target, parent) && len(parent) < len(target) {
					hidden[p] = true
				}
			case strings.HasPrefix(base, whiteoutPrefix):
				deleted := append(append([]string(nil), parent...), strings.TrimPrefix(base, whiteoutPrefix))
				if hasPrefix(target, deleted) {
					hidden[p] = true
				}
			case !hasPrefix(target, comps):
			case len(comps) == len(target):
				switch h.Typeflag {
				case tar.TypeDir:
					hidden[p] = true
				default:
					present[p] = true
				}
			case h.Typeflag == tar.TypeSymlink:
				// A reparse point on the way: a junction or a link to a
				// directory, resolved only on the running system.
				unknown[p] = true
			case h.Typeflag != tar.TypeDir:
				hidden[p] = true // a file where the path needs a directory
			}
		}
		if len(present) == len(want) {
			break // nothing further in this layer can change the answers
		}
	}
	decided := map[string]FileState{}
	for p := range want {
		switch {
		case present[p]:
			decided[p] = FilePresent
		case unknown[p]:
			decided[p] = FileUnknown
		case hidden[p]:
			decided[p] = FileAbsent
		}
	}
	return decided, nil
}
