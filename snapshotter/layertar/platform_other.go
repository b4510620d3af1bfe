//go:build !linux

package layertar

import (
	"io/fs"
	"os"
	"time"
)

// Without Linux xattrs and mknod, all metadata, whiteouts and opaque
// directories go to the sidecar file.

func setFileRecords(*os.File, records) error         { return errNoPlatform }
func setLinkRecords(*os.File, string, records) error { return errNoPlatform }

type xattrState struct {
	recs     records
	opaque   bool
	redirect bool
	metacopy bool
}

func readFileXattrs(*os.File) (xattrState, error)         { return xattrState{}, nil }
func readLinkXattrs(*os.File, string) (xattrState, error) { return xattrState{}, nil }

func makeWhiteout(*os.File, string) error { return errNoPlatform }
func isWhiteout(fs.FileInfo) bool         { return false }
func setOpaque(*os.File) error            { return errNoPlatform }

// setTimes sets the times of name in root; symlink times are not kept.
func setTimes(root *os.Root, _ *os.File, name string, atime, mtime time.Time) error {
	fi, err := root.Lstat(name)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	return root.Chtimes(name, atime, mtime)
}

// setFileTimes sets the times of the open file f, by its name (an
// os.Root's file has the whole path).
func setFileTimes(f *os.File, atime, mtime time.Time) error {
	return os.Chtimes(f.Name(), atime, mtime)
}

type fileKey struct{}

// hardlinkKey: hard links are not detected on this platform.
func hardlinkKey(fs.FileInfo) (fileKey, bool) { return fileKey{}, false }
