//go:build windows

package winbuild

import (
	"github.com/Microsoft/hcsshim/osversion"
)

// Host returns this machine's Windows version, revision included (the update
// build revision from the registry, as `cmd /c ver` shows it).
func Host() (Version, error) {
	v := osversion.Get()
	return hostVersion(uint32(v.MajorVersion), uint32(v.MinorVersion), uint32(v.Build), osversion.BuildRevision)
}
