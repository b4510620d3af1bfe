//go:build !windows

package record

import "testing"

// Off Windows no boot time is known: no shim is taken for one of an
// earlier boot.
func TestBootedSinceUnknownOffWindows(t *testing.T) {
	for _, s := range []Shim{Self(), {PID: 1, Start: 1}, {}} {
		if BootedSince(s) {
			t.Errorf("BootedSince(%+v) = true off Windows", s)
		}
	}
}
