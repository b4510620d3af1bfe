package pauseimage

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// isWhiteout reports an overlayfs whiteout: a 0/0 character device.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// isOpaque reports an overlayfs opaque directory, in either of the forms
// the layer importer writes.
func isOpaque(dir string) bool {
	for _, attr := range []string{"trusted.overlay.opaque", "user.overlay.opaque"} {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(dir, attr, buf)
		if err == nil && string(buf[:n]) == "y" {
			return true
		}
	}
	return false
}
