package record

import (
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
)

// A record is trusted only as far as its backend can check it: the shim
// runs as SYSTEM, and a record names what it releases (users it deletes,
// paths it unbinds or unmounts). Whoever could write the state directory
// could otherwise have it delete any user or unbind any path. A backend
// accepts only the names it makes and paths under its own roots, and
// leaves a record that names anything else alone (Refused).

// Refused is the error of a record field the backend will not act on,
// naming the record, the field and its value
// (errdefs.ErrFailedPrecondition: the record stays, for an administrator).
func (d Dir) Refused(id, field, value, why string) error {
	return fmt.Errorf("record %s: %s %q is refused: %s; nothing it names is released: check who can write %s (winproc doctor), then remove the record: %w", d.Path(id), field, value, why, d, errdefs.ErrFailedPrecondition)
}

// UnderWindowsRoot reports whether the Windows path p lies strictly under
// root, compared without case as Windows compares paths: p names no "."
// or ".." component, which could lead out of root, and uses backslashes
// only (a forward slash would hide such a component from this check).
func UnderWindowsRoot(root, p string) bool {
	root = strings.TrimRight(root, `\`)
	if root == "" || strings.Contains(p, "/") || len(p) <= len(root)+1 {
		return false
	}
	if !strings.EqualFold(p[:len(root)], root) || p[len(root)] != '\\' {
		return false
	}
	for _, c := range strings.Split(p[len(root)+1:], `\`) {
		if c == "" || strings.Trim(c, ".") == "" {
			return false
		}
	}
	return true
}
