package differ

import (
	"testing"

	"golang.org/x/sys/unix"
)

// whiteout records a deletion the way overlayfs does in an upper directory.
func whiteout(t *testing.T, path string) {
	t.Helper()
	if err := unix.Mknod(path, unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
}
