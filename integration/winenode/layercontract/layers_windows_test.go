//go:build windows

package layercontract

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/windows"
)

// driverInfo and layerDescriptor are hcsshim's internal/wclayer
// driverInfo and WC_LAYER_DESCRIPTOR (layerutils.go).
type driverInfo struct {
	flavour int
	home    *uint16
}

type layerDescriptor struct {
	id    windows.GUID
	flags uint32
	path  *uint16
}

// layers calls the stand-in's exports as hcsshim's internal/wclayer
// (zsyscall_windows.go) does: each returns an HRESULT.
type layers struct {
	dll  *windows.LazyDLL
	info driverInfo
	root string
}

func open(t *testing.T) *layers {
	t.Helper()
	dll, root := os.Getenv(standinEnv), os.Getenv(rootEnv)
	if dll == "" || root == "" {
		t.Skipf("%s or %s is unset: TestStandinLayersContractUnderWine runs these under Wine", standinEnv, rootEnv)
	}
	return &layers{dll: windows.NewLazyDLL(dll), info: driverInfo{home: u16(root)}, root: root}
}

func u16(s string) *uint16 {
	p, err := windows.UTF16PtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

// hresult turns an HRESULT into the Win32 error it carries.
func hresult(r uintptr) error {
	if r == 0 {
		return nil
	}
	if r&0xffff0000 == 0x80070000 {
		return windows.Errno(r & 0xffff)
	}
	return windows.Errno(r)
}

func (l *layers) call(name string, args ...uintptr) error {
	r, _, _ := l.dll.NewProc(name).Call(args...)
	return hresult(r)
}

func (l *layers) activate(id string) error {
	return l.call("ActivateLayer", uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))))
}

func (l *layers) prepare(id string, parents ...string) error {
	d := make([]layerDescriptor, len(parents)+1)
	for i, p := range parents {
		d[i] = layerDescriptor{path: u16(p)}
	}
	return l.call("PrepareLayer", uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))), uintptr(unsafe.Pointer(&d[0])), uintptr(len(parents)))
}

func (l *layers) mountPath(id string) (string, error) {
	var n uintptr
	if err := l.call("GetLayerMountPath", uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))), uintptr(unsafe.Pointer(&n)), 0); err != nil {
		return "", err
	}
	buf := make([]uint16, n)
	if err := l.call("GetLayerMountPath", uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))), uintptr(unsafe.Pointer(&n)), uintptr(unsafe.Pointer(&buf[0]))); err != nil {
		return "", err
	}
	return windows.UTF16ToString(buf), nil
}

func (l *layers) step(name, id string) error {
	return l.call(name, uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))))
}

func (l *layers) expand(id string, size uint64) error {
	return l.call("ExpandSandboxSize", uintptr(unsafe.Pointer(&l.info)), uintptr(unsafe.Pointer(u16(id))), uintptr(size))
}

// layer makes a layer directory with files under Files\.
func (l *layers) layer(t *testing.T, id string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(l.root, id)
	if err := os.MkdirAll(filepath.Join(dir, "Files"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// stateText reads a state file of the stand-ins: UTF-16 text
// (standin.h standin_write).
func stateText(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return windows.UTF16ToString(u)
}

func want(t *testing.T, what string, err, code error) {
	t.Helper()
	if code == nil && err != nil || code != nil && !errors.Is(err, code) {
		t.Fatalf("%s = %v, want %v", what, err, code)
	}
}

// TestOrder: a layer is activated, prepared over its parents, has a
// volume, then is unprepared and deactivated (hcsshim
// internal/layers/wcow_mount.go mountProcessIsolatedWCIFSLayers; the
// snapshotter's and shim/scratch's order). A step out of order fails with
// ERROR_INVALID_STATE, never with ERROR_NOT_READY or
// ERROR_DEVICE_NOT_CONNECTED, the codes wcow_mount.go retries the mount on.
func TestOrder(t *testing.T) {
	l := open(t)
	parent := l.layer(t, "order-parent", map[string]string{`Files\app.txt`: "image"})
	l.layer(t, "order", nil)

	want(t, "PrepareLayer before ActivateLayer", l.prepare("order", parent), windows.ERROR_INVALID_STATE)
	_, err := l.mountPath("order")
	want(t, "GetLayerMountPath before PrepareLayer", err, windows.ERROR_INVALID_STATE)
	want(t, "ActivateLayer", l.activate("order"), nil)
	want(t, "PrepareLayer", l.prepare("order", parent), nil)
	volume, err := l.mountPath("order")
	want(t, "GetLayerMountPath", err, nil)
	if !strings.HasPrefix(volume, `\\?\Volume{`) || !strings.HasSuffix(volume, `}\`) {
		t.Fatalf("GetLayerMountPath = %q, want \\\\?\\Volume{GUID}\\", volume)
	}
	b, err := os.ReadFile(filepath.Join(l.root, "order", "standin-volume", "app.txt"))
	if err != nil || string(b) != "image" {
		t.Fatalf("the volume's app.txt = %q, %v; want the parent's file", b, err)
	}
	want(t, "DeactivateLayer while prepared", l.step("DeactivateLayer", "order"), windows.ERROR_BUSY)
	want(t, "UnprepareLayer", l.step("UnprepareLayer", "order"), nil)
	want(t, "UnprepareLayer again", l.step("UnprepareLayer", "order"), windows.ERROR_INVALID_STATE)
	want(t, "DeactivateLayer", l.step("DeactivateLayer", "order"), nil)
	want(t, "DeactivateLayer again", l.step("DeactivateLayer", "order"), windows.ERROR_INVALID_STATE)
	want(t, "ActivateLayer of no layer", l.activate("none"), windows.ERROR_PATH_NOT_FOUND)
}

// TestDestroy: DestroyLayer removes the layer's directory, a link in it
// and not what the link points to (a reparse point is removed, not its
// target); it refuses an activated layer with ERROR_SHARING_VIOLATION
// (containerd's windows snapshotter deactivates and retries on it:
// core/snapshots/windows Remove) and, on request, with access denied.
func TestDestroy(t *testing.T) {
	l := open(t)
	l.layer(t, "active", nil)
	want(t, "ActivateLayer", l.activate("active"), nil)
	want(t, "DestroyLayer of an activated layer", l.step("DestroyLayer", "active"), windows.ERROR_SHARING_VIOLATION)
	want(t, "DeactivateLayer", l.step("DeactivateLayer", "active"), nil)
	want(t, "DestroyLayer once deactivated", l.step("DestroyLayer", "active"), nil)
	if _, err := os.Stat(filepath.Join(l.root, "active")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the destroyed layer's directory: %v, want gone", err)
	}

	l.layer(t, "denied", map[string]string{"standin-denied": ""})
	want(t, "DestroyLayer of a layer marked denied", l.step("DestroyLayer", "denied"), windows.ERROR_ACCESS_DENIED)
	want(t, "DestroyLayer of no layer", l.step("DestroyLayer", "none"), windows.ERROR_PATH_NOT_FOUND)
}

// TestExpandSandboxSize: the scratch's sandbox.vhdx must be there
// (hcsshim internal/wclayer/expandscratchsize.go ExpandScratchSize grows
// the VHD of a scratch made from blank.vhdx); the size asked for is
// recorded for tests in standin-size.
func TestExpandSandboxSize(t *testing.T) {
	l := open(t)
	l.layer(t, "novhd", nil)
	want(t, "ExpandSandboxSize without sandbox.vhdx", l.expand("novhd", 1<<30), windows.ERROR_FILE_NOT_FOUND)
	want(t, "ExpandSandboxSize of no layer", l.expand("none", 1<<30), windows.ERROR_PATH_NOT_FOUND)

	l.layer(t, "scratch", map[string]string{"sandbox.vhdx": "vhd"})
	const size = 21474836480
	want(t, "ExpandSandboxSize", l.expand("scratch", size), nil)
	if got := stateText(t, filepath.Join(l.root, "scratch", "standin-size")); got != "21474836480" {
		t.Fatalf("standin-size = %q, want %d", got, uint64(size))
	}
}

// TestNameToGuid: the same name gives the same GUID and another name
// another (hcsshim internal/wclayer NameToGuid, which LayerID uses to
// name a parent in a layer descriptor).
func TestNameToGuid(t *testing.T) {
	l := open(t)
	guid := func(name string) windows.GUID {
		var g windows.GUID
		want(t, "NameToGuid "+name, l.call("NameToGuid", uintptr(unsafe.Pointer(u16(name))), uintptr(unsafe.Pointer(&g))), nil)
		return g
	}
	a, b, c := guid("layer-a"), guid("layer-a"), guid("layer-b")
	if a != b || a == c {
		t.Fatalf("NameToGuid: layer-a gives %v and %v, layer-b %v; want one GUID per name", a, b, c)
	}
}
