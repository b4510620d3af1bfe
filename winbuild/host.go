package winbuild

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/containerd/log"
)

// hostVersion is the host's version from the OS's version numbers and the
// update build revision that readRevision reads from the registry (UBR).
//
// A missing UBR value (Wine has none) counts as revision 0 with a warning:
// the revision only orders images of one build (Compare), compatibility
// goes by build, so it must not stop a node.
func hostVersion(major, minor, build uint32, readRevision func() (uint32, error)) (Version, error) {
	rev, err := readRevision()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.L.WithError(err).Warn(`the host's Windows revision (registry value HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion\UBR) is missing; taking revision 0: images still match by build, only the choice among revisions of one build is lost`)
		rev = 0
	case err != nil:
		return Version{}, fmt.Errorf("read the host's Windows revision (registry value HKLM\\SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion\\UBR): %w", err)
	}
	return Version{Major: major, Minor: minor, Build: build, Revision: rev}, nil
}
