//go:build windows

package jobcontainer

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

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

var procBfSetupFilter = bindfltapi.NewProc("BfSetupFilter")

// bind is go-winio's ApplyFileBinding (a global mapping, one target only)
// with the source as filterSource gives it: go-winio appends a separator
// to every source naming a volume, so a file on a volume named by its
// GUID (the kubelet's termination log) is looked up as a directory.
// hcsshim's job containers pass the source unchanged
// (internal/jobobject ApplyFileBinding).
func (windowsHost) bind(root, source string, readOnly bool) error {
	flags := bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS
	if readOnly {
		flags |= bindfilter.BINDFLT_FLAG_READ_ONLY_MAPPING
	}
	source = filterSource(source)
	r, err := windows.UTF16PtrFromString(root)
	if err != nil {
		return err
	}
	s, err := windows.UTF16PtrFromString(source)
	if err != nil {
		return err
	}
	if err := procBfSetupFilter.Find(); err != nil {
		return err
	}
	hr, _, _ := syscall.SyscallN(procBfSetupFilter.Addr(), 0, uintptr(flags), uintptr(unsafe.Pointer(r)), uintptr(unsafe.Pointer(s)), 0, 0)
	if err := hresultError(hr); err != nil {
		return fmt.Errorf("BfSetupFilter(%s, %s): %w", root, source, err)
	}
	return nil
}

// hresultError is an HRESULT's error: a Windows error code for
// HRESULT_FROM_WIN32, as go-winio's generated calls give it.
func hresultError(hr uintptr) error {
	if int32(hr) >= 0 {
		return nil
	}
	if hr&0x1fff0000 == 0x00070000 {
		hr &= 0xffff
	}
	return syscall.Errno(hr)
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
