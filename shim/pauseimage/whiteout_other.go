//go:build !linux

package pauseimage

import "io/fs"

// Elsewhere layers carry no overlayfs whiteouts: Windows layers record
// deletions their own way, which the check does not read (see findFile).

func isWhiteout(fs.FileInfo) bool { return false }

func isOpaque(string) bool { return false }
