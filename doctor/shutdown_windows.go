//go:build windows

package doctor

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"
)

// localServices reads the node's service manager and registry.
func localServices() Services { return winServices{} }

// winServices reads with the least access that answers: the service
// manager with SC_MANAGER_CONNECT and each service with
// SERVICE_QUERY_CONFIG (mgr.Connect asks for all access, which only an
// administrator has), the registry key with KEY_QUERY_VALUE.
type winServices struct{}

func (winServices) Dependencies(name string) ([]string, error) {
	scm, err := windows.OpenSCManager(nil, nil, windows.SC_MANAGER_CONNECT)
	if err != nil {
		return nil, fmt.Errorf("connect to the service manager: %w", err)
	}
	defer windows.CloseServiceHandle(scm)
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, fmt.Errorf("service name %q: %w", name, err)
	}
	h, err := windows.OpenService(scm, p, windows.SERVICE_QUERY_CONFIG)
	if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
		return nil, fmt.Errorf("service %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open service %s: %w", name, err)
	}
	defer windows.CloseServiceHandle(h)
	deps, err := serviceDependencies(h)
	if err != nil {
		return nil, fmt.Errorf("read the configuration of service %s: %w", name, err)
	}
	return deps, nil
}

// serviceDependencies returns the lpDependencies of the service's
// QueryServiceConfig. mgr.Service.Config would also query the
// description, delayed start and SID type, which the dependencies do not
// need (and Wine's QueryServiceConfig2 answers ERROR_INVALID_LEVEL to).
func serviceDependencies(h windows.Handle) ([]string, error) {
	n := uint32(1024)
	for {
		// uint16s: the strings the configuration points to are in it.
		b := make([]uint16, (n+1)/2)
		c := (*windows.QUERY_SERVICE_CONFIG)(unsafe.Pointer(&b[0]))
		err := windows.QueryServiceConfig(h, c, uint32(len(b)*2), &n)
		if errors.Is(err, windows.ERROR_INSUFFICIENT_BUFFER) && int(n) > len(b)*2 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("QueryServiceConfig: %w", err)
		}
		if c.Dependencies == nil {
			return nil, nil
		}
		start := (uintptr(unsafe.Pointer(c.Dependencies)) - uintptr(unsafe.Pointer(&b[0]))) / 2
		if start >= uintptr(len(b)) {
			return nil, fmt.Errorf("QueryServiceConfig: the dependencies are outside its buffer")
		}
		return splitMultiSZ(b[start:]), nil
	}
}

func (winServices) PreshutdownOrder() ([]string, error) {
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, `SYSTEM\CurrentControlSet\Control`, registry.QUERY_VALUE)
	if err != nil {
		return nil, fmt.Errorf("open HKLM\\SYSTEM\\CurrentControlSet\\Control: %w", err)
	}
	defer k.Close()
	order, _, err := k.GetStringsValue("PreshutdownOrder")
	if errors.Is(err, registry.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", preshutdownOrderKey, err)
	}
	return order, nil
}
