//go:build !windows

package winbuild

import (
	"fmt"

	"github.com/containerd/errdefs"
)

// Host reports that only Windows knows its Windows build: elsewhere (the
// emulation) the emulated host's build must be configured.
func Host() (Version, error) {
	return Version{}, fmt.Errorf("the host's Windows build is only known on Windows; configure the emulated host build (e.g. 10.0.20348): %w", errdefs.ErrNotImplemented)
}
