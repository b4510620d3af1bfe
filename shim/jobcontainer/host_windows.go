//go:build windows

package jobcontainer

import (
	"errors"
	"os"

	"github.com/Microsoft/go-winio/pkg/bindfilter"
	"github.com/Microsoft/hcsshim"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/shim/scratch"
)

// New returns the HostProcess backend.
func New(opts Options) (*Backend, error) {
	return newBackend(windowsHost{}, opts), nil
}

// windowsHost is the backend's Windows: the binding, hcsshim's layer
// functions (shim/scratch) and the os package's file functions.
type windowsHost struct {
	winBinding
	scratch.Host
}

var _ host = windowsHost{}

func (windowsHost) isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

func (windowsHost) isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func (windowsHost) mkdirAll(path string) error { return os.MkdirAll(path, 0o755) }

func (windowsHost) symlink(target, link string) error { return os.Symlink(target, link) }

func (windowsHost) isLink(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink != 0
}

func (windowsHost) remove(path string) error { return os.Remove(path) }

// bindFilter is hcsshim's test (internal/jobcontainers
// FileBindingSupported): the API's DLL is there.
func (windowsHost) bindFilter() bool { return bindfltapi.Load() == nil }

var bindfltapi = windows.NewLazySystemDLL("bindfltapi.dll")

func (windowsHost) bind(root, source string, readOnly bool) error {
	return bindfilter.ApplyFileBinding(root, source, readOnly)
}

func (windowsHost) unbind(root string) error { return bindfilter.RemoveFileBinding(root) }

// facts reads the Windows error, inside hcsshim's HcsError for the layer
// functions.
func (windowsHost) facts(err error) errFacts {
	var he *hcsshim.HcsError
	if errors.As(err, &he) {
		return errnoFacts(he.Err).or(errnoFacts(err))
	}
	return errnoFacts(err)
}
