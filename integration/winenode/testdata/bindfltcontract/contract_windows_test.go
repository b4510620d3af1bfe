//go:build windows

// Package bindfltcontract holds the contract tests of the node's stand-in
// bindfltapi.dll (../standins/bindfltapi.c): one case per behaviour the
// stand-in promises, each naming the documentation or the incumbent's
// code it follows. TestBindFilterStandin (../../bindfilter_test.go) runs
// them under Wine with the stand-in in a private prefix's System32.
package bindfltcontract

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/Microsoft/go-winio/pkg/bindfilter"
	"golang.org/x/sys/windows"
)

// bootFile is the stand-in's boot file: deleting it is a reboot as the
// bind filter sees one.
const bootFile = `C:\ProgramData\winproc-standins\bindflt-boot`

var setupFilter = windows.NewLazySystemDLL("bindfltapi.dll").NewProc("BfSetupFilter")

// setup is BfSetupFilter with the source unchanged, as hcsshim's
// internal/jobobject ApplyFileBinding calls it.
func setup(flags uint32, root, target string) error {
	r, t := windows.StringToUTF16Ptr(root), windows.StringToUTF16Ptr(target)
	hr, _, _ := syscall.SyscallN(setupFilter.Addr(), 0, uintptr(flags), uintptr(unsafe.Pointer(r)), uintptr(unsafe.Pointer(t)), 0, 0)
	if int32(hr) >= 0 {
		return nil
	}
	if hr&0x1fff0000 == 0x00070000 {
		hr &= 0xffff
	}
	return syscall.Errno(hr)
}

// dirs makes a source directory holding a file and an empty place for
// the root, in a directory of the test's own.
func dirs(t *testing.T) (source, root string) {
	t.Helper()
	base, err := os.MkdirTemp("", "bindflt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeTree(base) })
	source, root = filepath.Join(base, "source"), filepath.Join(base, "root")
	for _, d := range []string{source, root} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(source, "file.txt"), "from the source")
	return source, root
}

// removeTree removes dir entry by entry, the last first: Go's
// os.RemoveAll fails under Wine.
func removeTree(dir string) {
	var paths []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		paths = append(paths, p)
		return nil
	})
	for i := len(paths) - 1; i >= 0; i-- {
		os.Remove(paths[i])
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return string(b)
}

func bind(t *testing.T, root, source string) {
	t.Helper()
	if err := bindfilter.ApplyFileBinding(root, source, false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bindfilter.RemoveFileBinding(root) })
}

// go-winio bind_filter_test.go TestApplyFileBinding: the root shows the
// target's files, and a change through the root is the target's.
func TestDirectoryMapped(t *testing.T) {
	source, root := dirs(t)
	bind(t, root, source)
	if got := read(filepath.Join(root, "file.txt")); got != "from the source" {
		t.Fatalf("the root's file reads %q", got)
	}
	if err := os.Remove(filepath.Join(root, "file.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(source, "file.txt")); err == nil {
		t.Error("a file removed through the root is still in the source")
	}
}

// microsoft/go-winio#274; containerd core/mount/mount_windows.go Unmount:
// removing a root without a mapping is ERROR_INVALID_PARAMETER.
func TestRemoveUnmappedRoot(t *testing.T) {
	_, root := dirs(t)
	if err := bindfilter.RemoveFileBinding(root); !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		t.Fatalf("RemoveFileBinding of an unmapped root = %v, want ERROR_INVALID_PARAMETER", err)
	}
	source, _ := dirs(t)
	bind(t, root, source)
	if err := bindfilter.RemoveFileBinding(root); err != nil {
		t.Fatal(err)
	}
	if err := bindfilter.RemoveFileBinding(root); !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		t.Fatalf("RemoveFileBinding of a root removed already = %v, want ERROR_INVALID_PARAMETER", err)
	}
}

// go-winio bind_filter.go BINDFLT_FLAG_NO_MULTIPLE_TARGETS ("fail mapping
// with STATUS_INVALID_PARAMETER if a mapping produces multiple targets"),
// TestEnsureOnlyOneTargetCanBeMounted: a second target is refused and the
// first stays.
func TestSecondTargetRefused(t *testing.T) {
	source, root := dirs(t)
	other, _ := dirs(t)
	bind(t, root, source)
	if err := bindfilter.ApplyFileBinding(root, other, false); !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
		t.Fatalf("a second target = %v, want ERROR_INVALID_PARAMETER", err)
	}
	if got := read(filepath.Join(root, "file.txt")); got != "from the source" {
		t.Errorf("after a refused second target the root's file reads %q", got)
	}
}

// hcsshim internal/jobcontainers mounts.go setupMounts ("The default
// behavior for bindflt is to shadow the directory"): what is at the root
// is hidden while mapped and shows again once the mapping goes.
func TestNonEmptyRootShadowed(t *testing.T) {
	source, root := dirs(t)
	write(t, filepath.Join(root, "own.txt"), "the root's own")
	bind(t, root, source)
	if _, err := os.Stat(filepath.Join(root, "own.txt")); err == nil {
		t.Error("the root's own file shows through the mapping")
	}
	if got := read(filepath.Join(root, "file.txt")); got != "from the source" {
		t.Errorf("the root's file reads %q", got)
	}
	if err := bindfilter.RemoveFileBinding(root); err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(root, "own.txt")); got != "the root's own" {
		t.Errorf("after the mapping the root's own file reads %q", got)
	}
}

// hcsshim internal/jobcontainers mounts.go setupMounts binds each OCI
// mount's source, files included (the kubelet's termination log), with
// the source unchanged (internal/jobobject ApplyFileBinding); the root
// need not exist, and is gone with the mapping.
func TestFileMapped(t *testing.T) {
	source, base := dirs(t)
	file, root := filepath.Join(source, "file.txt"), filepath.Join(base, "termination-log")
	if err := setup(bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS, root, file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bindfilter.RemoveFileBinding(root) })
	if got := read(root); got != "from the source" {
		t.Fatalf("the root reads %q", got)
	}
	write(t, root, "written through the root")
	if got := read(file); got != "written through the root" {
		t.Errorf("the file reads %q after a write through the root", got)
	}
	if err := bindfilter.RemoveFileBinding(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(root); err == nil {
		t.Error("the root is still there after the mapping")
	}
}

// The kubelet's termination log: a file named through its volume's GUID
// (\\?\Volume{GUID}\...), which hcsshim's job containers bind with the
// source unchanged, is mapped as the file.
func TestFileOnVolumeMapped(t *testing.T) {
	source, base := dirs(t)
	file, root := filepath.Join(source, "file.txt"), filepath.Join(base, "termination-log")
	var mount, volume [windows.MAX_PATH]uint16
	if err := windows.GetVolumePathName(windows.StringToUTF16Ptr(file), &mount[0], windows.MAX_PATH); err != nil {
		t.Fatal(err)
	}
	if err := windows.GetVolumeNameForVolumeMountPoint(&mount[0], &volume[0], windows.MAX_PATH); err != nil {
		t.Fatal(err)
	}
	named := windows.UTF16ToString(volume[:]) + strings.TrimPrefix(file, windows.UTF16ToString(mount[:]))
	if err := setup(bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS, root, named); err != nil {
		t.Fatalf("map %s: %v", named, err)
	}
	t.Cleanup(func() { bindfilter.RemoveFileBinding(root) })
	if got := read(root); got != "from the source" {
		t.Errorf("the root reads %q", got)
	}
}

// A file named with a trailing separator is not found: what go-winio's
// ApplyFileBinding gives a file on a volume named by its GUID (it appends
// one to every source naming a volume).
func TestFileWithSeparatorNotFound(t *testing.T) {
	source, base := dirs(t)
	root := filepath.Join(base, "termination-log")
	err := setup(bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS, root, filepath.Join(source, "file.txt")+`\`)
	if !errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		bindfilter.RemoveFileBinding(root)
		t.Fatalf("a file named with a trailing separator = %v, want ERROR_PATH_NOT_FOUND", err)
	}
}

// go-winio and hcsshim ApplyFileBinding make the root's parent first:
// "The parent directory needs to exist for the bind to work".
func TestRootParentMissing(t *testing.T) {
	source, base := dirs(t)
	root := filepath.Join(base, "missing", "root")
	if err := setup(bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS, root, source); !errors.Is(err, windows.ERROR_PATH_NOT_FOUND) {
		bindfilter.RemoveFileBinding(root)
		t.Fatalf("a root without its parent = %v, want ERROR_PATH_NOT_FOUND", err)
	}
}

// go-winio bind_filter.go GetBindMappings (BfGetMappings with
// BINDFLT_GET_MAPPINGS_FLAG_VOLUME), TestGetBindMappings: a mapping on the
// volume is listed with its root, its one target and its flags, in the
// layout GetBindMappings reads. The names are read from the buffer as
// listed: go-winio resolves each with GetFinalPathNameByHandle, which
// under Wine follows the stand-in's link from the root to the target.
func TestMappingsListed(t *testing.T) {
	source, root := dirs(t)
	if err := bindfilter.ApplyFileBinding(root, source, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bindfilter.RemoveFileBinding(root) })
	m, ok := mapping(t, root)
	if !ok {
		t.Fatalf("BfGetMappings does not list %s", root)
	}
	want := bindfilter.BINDFLT_FLAG_NO_MULTIPLE_TARGETS | bindfilter.BINDFLT_FLAG_READ_ONLY_MAPPING
	if len(m.Targets) != 1 || !strings.EqualFold(m.Targets[0], source) || m.Flags != want {
		t.Errorf("the mapping at %s is %+v, want the target %s and flags %#x", root, m, source, want)
	}
	if all, err := bindfilter.GetBindMappings(root); err != nil || len(all) == 0 {
		t.Errorf("go-winio's GetBindMappings = %+v, %v", all, err)
	}
	if err := bindfilter.RemoveFileBinding(root); err != nil {
		t.Fatal(err)
	}
	if _, ok := mapping(t, root); ok {
		t.Errorf("BfGetMappings lists %s after its removal", root)
	}
}

var getMappings = windows.NewLazySystemDLL("bindfltapi.dll").NewProc("BfGetMappings")

// mapping is the mapping at root as BfGetMappings lists it for root's
// volume, decoded as go-winio's GetBindMappings decodes it, without
// resolving the names.
func mapping(t *testing.T, root string) (bindfilter.BindMapping, bool) {
	t.Helper()
	buf := make([]byte, 64<<10)
	size := uint32(len(buf))
	hr, _, _ := syscall.SyscallN(getMappings.Addr(), uintptr(bindfilter.BINDFLT_GET_MAPPINGS_FLAG_VOLUME), 0,
		uintptr(unsafe.Pointer(windows.StringToUTF16Ptr(root))), 0, uintptr(unsafe.Pointer(&size)), uintptr(unsafe.Pointer(&buf[0])))
	if int32(hr) < 0 {
		t.Fatalf("BfGetMappings: %#x", hr)
	}
	u32 := func(at uint32) uint32 { return binary.LittleEndian.Uint32(buf[at:]) }
	name := func(at uint32) string {
		u := make([]uint16, u32(at)/2)
		for i := range u {
			u[i] = binary.LittleEndian.Uint16(buf[u32(at+4)+uint32(2*i):])
		}
		return windows.UTF16ToString(u)
	}
	if u32(0) != size || u32(4) != 0 {
		t.Fatalf("BfGetMappings' header: size %d status %d, want %d and 0", u32(0), u32(4), size)
	}
	for i := uint32(0); i < u32(8); i++ {
		e := 12 + 20*i
		m := bindfilter.BindMapping{MountPoint: name(e), Flags: u32(e + 8)}
		for j := uint32(0); j < u32(e+12); j++ {
			m.Targets = append(m.Targets, name(u32(e+16)+8*j))
		}
		if strings.EqualFold(m.MountPoint, root) {
			return m, true
		}
	}
	return bindfilter.BindMapping{}, false
}

// Mappings live in the bind filter driver and do not survive a reboot:
// after the node's simulated one (the boot file deleted) a mapping is
// neither listed nor removable (ERROR_INVALID_PARAMETER), a mapping under
// another's root (a mount under a container's rootfs) included, and the
// root shows what it shadowed.
func TestRebootDropsMappings(t *testing.T) {
	source, root := dirs(t)
	other, _ := dirs(t)
	write(t, filepath.Join(root, "own.txt"), "the root's own")
	bind(t, root, source)
	nested := filepath.Join(root, "nested")
	bind(t, nested, other)
	if err := os.Remove(bootFile); err != nil {
		t.Fatalf("simulate a reboot: %v", err)
	}
	if _, ok := mapping(t, root); ok {
		t.Errorf("GetBindMappings lists %s after a reboot", root)
	}
	if got := read(filepath.Join(root, "own.txt")); got != "the root's own" {
		t.Errorf("after a reboot the root's own file reads %q", got)
	}
	for _, r := range []string{nested, root} {
		if err := bindfilter.RemoveFileBinding(r); !errors.Is(err, windows.ERROR_INVALID_PARAMETER) {
			t.Errorf("RemoveFileBinding(%s) after a reboot = %v, want ERROR_INVALID_PARAMETER", r, err)
		}
	}
}
