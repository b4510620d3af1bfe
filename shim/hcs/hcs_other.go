//go:build !windows

package hcs

import (
	"fmt"

	"github.com/winproc/winproc/shim/compute"
)

// New fails: HCS exists on Windows only. On Linux the shim uses the Wine
// emulation backend; this package's logic is still built and tested here
// against a fake of the computecore.dll binding.
func New(opts Options) (*Backend, error) {
	return nil, fmt.Errorf("the HCS compute backend runs on Windows only: %w", compute.ErrNotSupported)
}
