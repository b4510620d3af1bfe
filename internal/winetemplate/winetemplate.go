// Package winetemplate names what `make wine` (build/wine/setup.sh) adds to
// a template Wine prefix besides Wine's own files, for what runs Windows
// programs from it: the Linux emulation and the tests.
package winetemplate

import (
	"os"
	"path/filepath"
)

// ExitLibrary is the template-relative path of the preload library built
// from build/wine/wineexit.c. A Wine process started with it exits reliably
// (without it, about 1 graceful exit in 80 after a console event hangs and
// is killed) and can record its exit status whole for the emulation.
const ExitLibrary = "winproc/wineexit.so"

// ExitLibraryIn returns the path of ExitLibrary in the template prefix, or
// "" if the template has none (made before `make wine` built it).
func ExitLibraryIn(template string) string {
	p := filepath.Join(template, ExitLibrary)
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	return p
}
