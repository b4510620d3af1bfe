//go:build !windows

package jobcontainer

import (
	"errors"
	"testing"

	"github.com/winproc/winproc/shim/compute"
)

func TestNewOnlyOnWindows(t *testing.T) {
	b, err := New(Options{})
	if b != nil || !errors.Is(err, compute.ErrNotSupported) {
		t.Errorf("New = %v, %v", b, err)
	}
}
