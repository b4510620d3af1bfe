//go:build windows

package hcs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/windows"

	"github.com/winproc/winproc/integration/winenode/hcscontract"
	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/hcs/schema2"
)

// standinHCS is the binding and the core over the node's stand-in HCS
// (integration/winenode/testdata/standins: computecore.dll and its
// service), loaded from the path TestComputecoreBindingUnderWine gives.
type standinHCS struct {
	b computecoreBinding
	c *computeCore
}

func loadStandin(t *testing.T) *standinHCS {
	t.Helper()
	path := os.Getenv(hcscontract.StandinEnv)
	if path == "" {
		t.Skipf("%s is not set: TestComputecoreBindingUnderWine runs this", hcscontract.StandinEnv)
	}
	b := newComputecoreBinding(windows.NewLazyDLL(path))
	return &standinHCS{b: b, c: &computeCore{api: b}}
}

// volume prepares a container volume as the layer stand-in would have
// (its state file names the directory that is the container's C:\), with
// the node's test program in it, and returns the volume's name.
func (s *standinHCS) volume(t *testing.T) string {
	t.Helper()
	dir := winetest.TempDir(t)
	if app := os.Getenv(hcscontract.TestAppEnv); app != "" {
		b, err := os.ReadFile(app)
		if err != nil {
			t.Fatalf("read the test program: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "winproc-testapp.exe"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	vol := fmt.Sprintf(`\\?\Volume{%s}`, strings.ReplaceAll(filepath.Base(dir), ".", "-"))
	if err := hcscontract.WriteVolume(vol, dir); err != nil {
		t.Fatal(err)
	}
	return vol
}

// document is a process-isolated container's document on a volume of its
// own, owned by owner.
func (s *standinHCS) document(t *testing.T, owner string) *schema2.ComputeSystem {
	t.Helper()
	return &schema2.ComputeSystem{Owner: owner, SchemaVersion: &schema2.V21, Container: &schema2.Container{
		Storage: &schema2.Storage{Path: s.volume(t)},
	}}
}

// create creates the system id; the cleanup terminates and closes it, so
// that the stand-in service, with no system left, exits.
func (s *standinHCS) create(t *testing.T, id string, doc *schema2.ComputeSystem) *coreSystem {
	t.Helper()
	sys, err := s.c.createContainer(context.Background(), id, doc)
	if err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		sys.Terminate(ctx)
		sys.Close()
	})
	return sys.(*coreSystem)
}

// writeFaults sets the stand-in's faults (faults.h lines); the cleanup
// checks that the test met them, and removes the file.
func writeFaults(t *testing.T, lines string) {
	t.Helper()
	if err := os.MkdirAll(hcscontract.StateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hcscontract.FaultsFile, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(hcscontract.FaultsFile); err != nil || strings.TrimSpace(string(b)) != "" {
			t.Errorf("faults not met: %q, %v", b, err)
		}
		os.Remove(hcscontract.FaultsFile)
	})
}

// keptDocument is the document the stand-in service got for id.
func keptDocument(t *testing.T, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(hcscontract.StateDir, "documents", id+".json"))
	if err != nil {
		t.Fatalf("the document the stand-in kept: %v", err)
	}
	return string(b)
}
