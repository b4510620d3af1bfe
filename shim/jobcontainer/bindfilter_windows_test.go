//go:build windows

package jobcontainer

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hostprocess"
	"github.com/winproc/winproc/shim/record"
)

// These tests run the backend with the bind filter: under Wine, against
// the node's stand-in bindfltapi.dll, installed in a private prefix by
// TestBindFilterUnderWine (bindfilter_wine_test.go); elsewhere they are
// skipped where the DLL does not load.

// standinBootFile is the stand-in's boot file (integration/winenode
// testdata/standins/bindfltapi.c): deleting it is a reboot as the bind
// filter sees one, every mapping dropped.
const standinBootFile = `C:\ProgramData\winproc-standins\bindflt-boot`

func bindFilterBackend(t *testing.T) *Backend {
	t.Helper()
	if !(windowsHost{}).bindFilter() {
		t.Skip("bindfltapi.dll does not load here")
	}
	b := realBackend(t)
	if !b.binds {
		t.Fatal("the backend does not bind with the bind filter")
	}
	return b
}

// volumePath names path through its volume's GUID, as the kubelet names
// a container's termination log.
func volumePath(t *testing.T, path string) string {
	t.Helper()
	var mount, volume [windows.MAX_PATH]uint16
	if err := windows.GetVolumePathName(windows.StringToUTF16Ptr(path), &mount[0], windows.MAX_PATH); err != nil {
		t.Fatal(err)
	}
	if err := windows.GetVolumeNameForVolumeMountPoint(&mount[0], &volume[0], windows.MAX_PATH); err != nil {
		t.Fatalf("the volume of %s has no GUID name: %v", path, err)
	}
	rest := strings.TrimPrefix(path, windows.UTF16ToString(mount[:]))
	return windows.UTF16ToString(volume[:]) + rest
}

// A file mount whose source is named through its volume's GUID (the
// kubelet's termination log) is bound at its place under the mount
// point, the file seen there, and unbound by Close.
func TestBindFilterFileMount(t *testing.T) {
	b := bindFilterBackend(t)
	src := filepath.Join(winetest.TempDir(t), "termination-log")
	if err := os.WriteFile(src, []byte("last words"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &compute.Settings{
		HostProcess:       &compute.HostProcess{InheritUser: true},
		MappedDirectories: []compute.MappedDirectory{{HostPath: volumePath(t, src), ContainerPath: `C:\dev\termination-log`}},
	}
	sys := container(t, b, s)
	place := filepath.Join(sys.(*system).mountPoint, `dev\termination-log`)
	if got, err := os.ReadFile(place); err != nil || string(got) != "last words" {
		t.Fatalf("the mount at %s reads %q, %v", place, got, err)
	}
	if err := os.WriteFile(place, []byte("written in the container"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(src); string(got) != "written in the container" {
		t.Errorf("the source reads %q after a write through the mount", got)
	}
	if err := sys.Terminate(context.Background()); err != nil && !errdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	<-sys.Wait()
	if err := sys.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(place); err == nil {
		t.Errorf("%s is still there after Close", place)
	}
}

// A record naming bindings the filter does not have (never made, or
// dropped by a reboot) is released by the shim's delete (Open): the
// filter answers ERROR_INVALID_PARAMETER for each.
func TestBindFilterReleaseUnbound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reboot bool
	}{
		{"never made", false},
		{"dropped by a reboot", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bindFilterBackend(t)
			id := uniqueID(t)
			mountPoint := hostprocess.Join(b.mountRoot, id)
			data := hostprocess.Join(mountPoint, `var\data`)
			if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.reboot {
				if err := (windowsHost{}).bind(data, winetest.TempDir(t), false); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(standinBootFile); err != nil {
					t.Fatalf("simulate a reboot: %v", err)
				}
			}
			h := held{ID: id, Scratch: `C:\scratch`, MountPoint: mountPoint, Bindings: []string{data}, Shim: record.Shim{PID: 1 << 30, Start: 1}}
			if err := b.records.Write(id, h); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Open(context.Background(), id); !errdefs.IsNotFound(err) {
				t.Fatalf("Open = %v, want NotFound", err)
			}
			if ok, err := b.records.Read(id, &held{}); ok || err != nil {
				t.Errorf("the record is left (%v)", err)
			}
		})
	}
}
