package layertar

import (
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
)

// kindError is a sentinel error that also matches an errdefs class, so that
// callers (and containerd's gRPC error mapping) can classify it.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

var (
	// ErrUnsafePath reports an entry name or link target that could leave the
	// layer directory or write through a symlink.
	ErrUnsafePath error = &kindError{"unsafe path", errdefs.ErrInvalidArgument}
	// ErrInvalidEntry reports an entry that is not valid in a Windows layer
	// (bad name, duplicate, hard link to a missing file, ...).
	ErrInvalidEntry error = &kindError{"invalid entry", errdefs.ErrInvalidArgument}
	// ErrInvalidMetadata reports a MSWINDOWS.* or related PAX record that does
	// not decode.
	ErrInvalidMetadata error = &kindError{"invalid Windows metadata", errdefs.ErrInvalidArgument}
	// ErrEntryTooLarge reports an entry whose declared size exceeds the limit.
	ErrEntryTooLarge error = &kindError{"entry too large", errdefs.ErrInvalidArgument}
	// ErrCorruptArchive reports a truncated or malformed tar stream.
	ErrCorruptArchive error = &kindError{"corrupt or truncated archive", errdefs.ErrInvalidArgument}
	// ErrUnsupported reports an entry or file type this package cannot
	// represent (device nodes, fifos, overlay redirects, ...).
	ErrUnsupported error = &kindError{"unsupported", errdefs.ErrNotImplemented}
)

// EntryError is returned by Import and the exporters for a problem with one
// entry. Name is the tar entry name (Import) or the path (exporters).
type EntryError struct {
	Name string
	Err  error
}

func (e *EntryError) Error() string { return fmt.Sprintf("layertar: entry %q: %v", e.Name, e.Err) }
func (e *EntryError) Unwrap() error { return e.Err }

// errorf returns an error matching kind, with a formatted detail message.
func errorf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{kind}, args...)...)
}

// errNoPlatform tells the generic code that the platform cannot store
// something (an xattr, a whiteout device) so the sidecar must be used.
var errNoPlatform = errors.New("not supported by the platform or file system")
