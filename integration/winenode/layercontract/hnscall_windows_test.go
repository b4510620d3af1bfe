//go:build windows

package layercontract

import (
	"encoding/json"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// hnsCall is HNSCall as hnslib's hcn zsyscall_windows.go calls it; the
// answer is freed as interop.ConvertAndFreeCoTaskMemString frees it.
func (l *layers) hnsCall(method, path, request string) (string, uintptr) {
	var response *uint16
	r, _, _ := syscall.SyscallN(l.dll.NewProc("HNSCall").Addr(),
		uintptr(unsafe.Pointer(u16(method))), uintptr(unsafe.Pointer(u16(path))), uintptr(unsafe.Pointer(u16(request))), uintptr(unsafe.Pointer(&response)))
	if response == nil {
		return "", r
	}
	defer windows.CoTaskMemFree(unsafe.Pointer(response))
	return windows.UTF16PtrToString(response), r
}

// GET /endpoints/ answers as hnslib's hnsCall reads an answer
// ({"Success","Error","Output"}) with the node's endpoints, none (hnslib
// internal/hns hnsendpoint.go HNSListEndpointRequest, which the kubelet's
// /stats/summary calls); what the stand-in does not serve is E_NOTIMPL.
func TestHNSCallListsNoEndpoints(t *testing.T) {
	l := open(t)
	out, r := l.hnsCall("GET", "/endpoints/", "")
	if r != 0 {
		t.Fatalf("HNSCall GET /endpoints/: %#x", r)
	}
	var answer struct {
		Success bool
		Error   string
		Output  []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &answer); err != nil || !answer.Success || answer.Output == nil || len(answer.Output) != 0 {
		t.Errorf("HNSCall GET /endpoints/: %q, %v; want success and no endpoint", out, err)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/networks/"}, {"POST", "/endpoints/"}, {"GET", "/endpointstats/1"}} {
		if out, r := l.hnsCall(c.method, c.path, ""); r != uintptr(windows.E_NOTIMPL) || out != "" {
			t.Errorf("HNSCall %s %s: %#x %q, want E_NOTIMPL and no answer", c.method, c.path, r, out)
		}
	}
}
