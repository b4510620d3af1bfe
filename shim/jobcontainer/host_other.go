//go:build !windows

package jobcontainer

import (
	"fmt"

	"github.com/winproc/winproc/shim/compute"
)

// New fails: job objects exist on Windows only. The package's logic is
// still built and tested here, against a fake of the binding.
func New(opts Options) (*Backend, error) {
	return nil, fmt.Errorf("the HostProcess compute backend runs on Windows only: %w", compute.ErrNotSupported)
}
