package pauseimage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"

	"github.com/winproc/winproc/internal/wincmdline"
	"github.com/winproc/winproc/shim/winpath"
	"github.com/winproc/winproc/snapshotter/layermount"
)

// errUnverifiable marks a program path the layers cannot answer for.
var errUnverifiable = errors.New("cannot be checked in the image layers")

// checkProgram checks that the program args run (args[0], or the first word
// of the command line args[0] if escaped) is in the image: a file at that
// path in the union of the layer directories parents, nearest first. Only
// absolute paths on C: (`C:\pause.exe`, `\pause.exe`, `/pause.exe`) are
// checked; a bare name is found through the working directory and PATH at
// run time and is left to that. Anything the check cannot read is logged and
// let through: the compute system's start reports it too, only later.
func checkProgram(ctx context.Context, image string, args []string, escaped bool, parents []string, fromCmd bool) error {
	if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
		return fmt.Errorf("pause image %q has neither an entrypoint nor a cmd; the pause process needs one (e.g. C:\\pause.exe): %w", image, errdefs.ErrFailedPrecondition)
	}
	program := args[0]
	if escaped {
		program = wincmdline.Program(program)
	}
	what := "its entrypoint"
	if fromCmd {
		what = "its cmd"
	}
	l := log.G(ctx).WithField("image", image).WithField("program", program)
	components, ok := winpath.SystemDrivePath(program)
	if !ok {
		l.Debug("pause image program is not an absolute path on C:; not checked in the layers")
		return nil
	}
	err := findFile(parents, components)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("pause image %q has no %s (%s): %w", image, program, what, errdefs.ErrFailedPrecondition)
	default:
		l.WithError(err).Warn("pause image program not checked in the layers")
		return nil
	}
}

// findFile looks for the non-directory C:\<components...> in the union of
// the layer directories (nearest first), each holding its C:\ tree in
// Files/. It returns nil if found, an error matching fs.ErrNotExist if not,
// errUnverifiable if a directory on the way is a link (not followed), or
// the error reading a layer.
//
// Names match case-insensitively, as on Windows (an exact match first, then
// the first case-insensitive one of the directory). The union follows the
// layers' Linux (emulation) representation of deletions, overlayfs's: a
// whiteout (a 0/0 character device) hides the name in farther layers, as
// does a non-directory in a nearer layer for a directory on the way, and an
// opaque directory (overlay.opaque xattr) hides the farther layers' content
// of that directory. Deletions recorded in a layer's metadata sidecar (where
// whiteouts could not be made) and Windows layers' own tombstones are not
// read: a file deleted that way counts as present.
func findFile(layers []string, components []string) error {
	path := strings.Join(components, `\`)
	for _, layer := range layers {
		found, stop, err := findInLayer(filepath.Join(layer, layermount.FilesDir), components)
		if err != nil {
			return fmt.Errorf("C:\\%s in layer %s: %w", path, layer, err)
		}
		if found {
			return nil
		}
		if stop {
			break
		}
	}
	return fmt.Errorf("C:\\%s: %w", path, fs.ErrNotExist)
}

// findInLayer looks for components in one layer's tree dir. found reports a
// non-directory at the path; stop that this layer hides the path in farther
// layers (a whiteout, a directory in place of the file or a file in place of
// a directory on the way, an opaque directory on the way).
func findInLayer(dir string, components []string) (found, stop bool, err error) {
	for i, c := range components {
		name, fi, err := lookupName(dir, c)
		if errors.Is(err, fs.ErrNotExist) {
			return false, stop, nil
		}
		if err != nil {
			return false, false, err
		}
		p := filepath.Join(dir, name)
		if isWhiteout(fi) {
			return false, true, nil
		}
		if i == len(components)-1 {
			return !fi.IsDir(), true, nil
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return false, false, fmt.Errorf("%s is a link: %w", p, errUnverifiable)
		case !fi.IsDir():
			return false, true, nil
		}
		if isOpaque(p) {
			stop = true
		}
		dir = p
	}
	return false, stop, nil
}

// lookupName finds name in dir: exactly, or else case-insensitively. It
// returns the name on disk.
func lookupName(dir, name string) (string, fs.FileInfo, error) {
	fi, err := os.Lstat(filepath.Join(dir, name))
	if err == nil {
		return name, fi, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	for _, e := range entries {
		if strings.EqualFold(e.Name(), name) {
			fi, err := os.Lstat(filepath.Join(dir, e.Name()))
			return e.Name(), fi, err
		}
	}
	return "", nil, fs.ErrNotExist
}
