//go:build windows

package winbuild

import (
	"fmt"

	"github.com/Microsoft/hcsshim/osversion"
)

// Host returns this machine's Windows version, revision included (the update
// build revision from the registry, as `cmd /c ver` shows it).
func Host() (Version, error) {
	v := osversion.Get()
	rev, err := osversion.BuildRevision()
	if err != nil {
		return Version{}, fmt.Errorf("read the host's Windows revision: %w", err)
	}
	return Version{Major: uint32(v.MajorVersion), Minor: uint32(v.MinorVersion), Build: uint32(v.Build), Revision: rev}, nil
}
