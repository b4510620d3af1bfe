//go:build !windows

package process

import (
	"io"
	"os"
)

// loggerInputs are a logging binary's inputs as containerd's runc shim
// passes them: descriptors 3 and 4, and 5 to close when ready.
func loggerInputs() (stdout, stderr io.Reader, ready io.Closer, err error) {
	return os.NewFile(3, "stdout"), os.NewFile(4, "stderr"), os.NewFile(5, "ready"), nil
}
