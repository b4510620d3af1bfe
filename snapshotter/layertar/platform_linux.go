//go:build linux

package layertar

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	// Namespaces of the metadata xattrs: user.* is not allowed on symlinks.
	xattrNSFile = "user."
	xattrNSLink = "trusted."

	opaqueXattrTrusted   = "trusted.overlay.opaque"
	opaqueXattrUser      = "user.overlay.opaque"
	redirectXattrTrusted = "trusted.overlay.redirect"
	redirectXattrUser    = "user.overlay.redirect"
	metacopyXattrTrusted = "trusted.overlay.metacopy"
	metacopyXattrUser    = "user.overlay.metacopy"
)

// withFd runs fn with the file descriptor of f, keeping f alive.
func withFd(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// procPath names the entry name of the directory open as fd without
// following name itself, for the l*xattr calls that have no *at variant.
func procPath(fd int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
}

// xattrFallback turns the errors meaning "cannot store this here" into
// errNoPlatform so that the importer uses the sidecar.
func xattrFallback(err error) error {
	switch {
	case errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES),
		errors.Is(err, unix.E2BIG), errors.Is(err, unix.ERANGE), errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("%w: %v", errNoPlatform, err)
	}
	return err
}

// setFileRecords stores recs as user.* xattrs of the open file or directory f.
func setFileRecords(f *os.File, recs records) error {
	return withFd(f, func(fd int) error {
		for k, v := range recs {
			if err := unix.Fsetxattr(fd, xattrNSFile+k, []byte(v), 0); err != nil {
				return xattrFallback(err)
			}
		}
		return nil
	})
}

// setLinkRecords stores recs as trusted.* xattrs of the symlink name in dir.
func setLinkRecords(dir *os.File, name string, recs records) error {
	return withFd(dir, func(fd int) error {
		p := procPath(fd, name)
		for k, v := range recs {
			if err := unix.Lsetxattr(p, xattrNSLink+k, []byte(v), 0); err != nil {
				if errors.Is(err, unix.ENOENT) { // no /proc
					return fmt.Errorf("%w: %v", errNoPlatform, err)
				}
				return xattrFallback(err)
			}
		}
		return nil
	})
}

// xattrState is what the exporter needs from an entry's xattrs.
type xattrState struct {
	recs     records
	opaque   bool
	redirect bool
	metacopy bool
}

func readXattrs(ns string, list func([]byte) (int, error), get func(string, []byte) (int, error)) (xattrState, error) {
	var st xattrState
	names, err := readBuf(struct{}{}, func(_ struct{}, b []byte) (int, error) { return list(b) })
	if err != nil || len(names) == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			err = nil
		}
		return st, err
	}
	for _, name := range bytes.Split(names, []byte{0}) {
		n := string(name)
		switch {
		case n == "":
			continue
		case n == opaqueXattrTrusted || n == opaqueXattrUser:
			v, err := readBuf(n, get)
			if err != nil && !errors.Is(err, unix.ENODATA) {
				return st, err
			}
			st.opaque = st.opaque || string(v) == "y"
		case n == redirectXattrTrusted || n == redirectXattrUser:
			st.redirect = true
		case n == metacopyXattrTrusted || n == metacopyXattrUser:
			st.metacopy = true
		case strings.HasPrefix(n, ns) && isStoredKey(n[len(ns):]):
			v, err := readBuf(n, get)
			if errors.Is(err, unix.ENODATA) {
				continue // removed meanwhile
			}
			if err != nil {
				return st, err
			}
			if st.recs == nil {
				st.recs = make(records)
			}
			st.recs[n[len(ns):]] = string(v)
		}
	}
	return st, nil
}

// readBuf calls a listxattr/getxattr style function, growing the buffer as
// needed.
func readBuf[K any](key K, call func(K, []byte) (int, error)) ([]byte, error) {
	buf := make([]byte, 256)
	for {
		n, err := call(key, buf)
		if errors.Is(err, unix.ERANGE) {
			size, err := call(key, nil)
			if err != nil {
				return nil, err
			}
			buf = make([]byte, max(size, 2*len(buf)))
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}

func readFileXattrs(f *os.File) (xattrState, error) {
	var st xattrState
	err := withFd(f, func(fd int) error {
		var err error
		st, err = readXattrs(xattrNSFile,
			func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
			func(n string, b []byte) (int, error) { return unix.Fgetxattr(fd, n, b) })
		return err
	})
	return st, err
}

func readLinkXattrs(dir *os.File, name string) (xattrState, error) {
	var st xattrState
	err := withFd(dir, func(fd int) error {
		p := procPath(fd, name)
		var err error
		st, err = readXattrs(xattrNSLink,
			func(b []byte) (int, error) { return unix.Llistxattr(p, b) },
			func(n string, b []byte) (int, error) { return unix.Lgetxattr(p, n, b) })
		if errors.Is(err, unix.ENOENT) { // no /proc: no metadata to find
			st, err = xattrState{}, nil
		}
		return err
	})
	return st, err
}

// makeWhiteout creates the overlayfs whiteout for name in dir: a 0/0
// character device.
func makeWhiteout(dir *os.File, name string) error {
	return withFd(dir, func(fd int) error {
		return unix.Mknodat(fd, name, unix.S_IFCHR, 0)
	})
}

func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode().Type() != fs.ModeDevice|fs.ModeCharDevice {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}

// setOpaque marks the directory f opaque for overlayfs.
func setOpaque(f *os.File) error {
	return withFd(f, func(fd int) error {
		err := unix.Fsetxattr(fd, opaqueXattrTrusted, []byte("y"), 0)
		if err == nil {
			return nil
		}
		// Without CAP_SYS_ADMIN: the form userxattr overlay mounts read.
		if uerr := unix.Fsetxattr(fd, opaqueXattrUser, []byte("y"), 0); uerr == nil {
			return nil
		}
		return fmt.Errorf("setting %s: %w", opaqueXattrTrusted, err)
	})
}

// setTimes sets the times of name in dir, not following symlinks.
func setTimes(_ *os.Root, dir *os.File, name string, atime, mtime time.Time) error {
	a, err := unix.TimeToTimespec(atime)
	if err != nil {
		return err
	}
	m, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return err
	}
	return withFd(dir, func(fd int) error {
		return unix.UtimesNanoAt(fd, name, []unix.Timespec{a, m}, unix.AT_SYMLINK_NOFOLLOW)
	})
}

// setFileTimes sets the times of the open file f: utimensat(2) with no
// path works on the descriptor.
func setFileTimes(f *os.File, atime, mtime time.Time) error {
	a, err := unix.TimeToTimespec(atime)
	if err != nil {
		return err
	}
	m, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return err
	}
	ts := [2]unix.Timespec{a, m}
	return withFd(f, func(fd int) error {
		if _, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0); e != 0 {
			return e
		}
		return nil
	})
}

// fileKey identifies an inode, for hard link detection.
type fileKey struct{ dev, ino uint64 }

// hardlinkKey returns the inode of fi if it has more than one name.
func hardlinkKey(fi fs.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileKey{}, false
	}
	return fileKey{uint64(st.Dev), st.Ino}, true //nolint:unconvert // Dev is uint32 on some architectures
}
