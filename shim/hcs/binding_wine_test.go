//go:build linux

package hcs

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/winenode"
	"github.com/winproc/winproc/integration/winenode/hcscontract"
	"github.com/winproc/winproc/internal/winetest"
)

// TestComputecoreBindingUnderWine builds the node's stand-in HCS
// (integration/winenode/testdata/standins: computecore.dll and
// computecore-service.exe) with MinGW and the node's test program, and
// runs this package's Windows tests TestComputecoreBinding, ...Faults and
// ...Enumerate under Wine against them: the binding's system calls,
// callbacks and pipe handles, which nothing else runs, against real
// processes and the faults of faults.h.
//
// It runs twice, each in a Wine prefix of its own (the stand-in keeps its
// state in the prefix's ProgramData): as built, and built with a stack
// move at every function entry (runtime.mayMoreStackMove). A pointer that
// reaches the DLL as a uintptr outside the system call's expression then
// points into a stack that has moved, and the DLL's writes are lost or
// land in freed memory.
func TestComputecoreBindingUnderWine(t *testing.T) {
	template := winetest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	if err := winenode.BuildStandinsFrom(filepath.Join("..", "..", "integration", "winenode", "testdata", "standins"), dir); err != nil {
		t.Fatal(err)
	}
	app := winetest.BuildExe(t, "../../cmd/winproc-testapp")
	for _, tc := range winetest.BindingBuilds {
		t.Run(tc.Name, func(t *testing.T) {
			prefix := winetest.PrivatePrefix(t, template)
			exe := winetest.BuildTests(ctx, t, dir, tc.Name, tc.Flags...)
			cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestComputecore(Binding|Faults|Enumerate)$", "-test.v")
			cmd.Env = append(cmd.Env, hcscontract.StandinEnv+"="+winPath(filepath.Join(dir, "computecore.dll")), hcscontract.TestAppEnv+"="+winPath(app))
			// A failed test may leave a system, and with it the stand-in
			// service and the prefix's wineserver, running.
			t.Cleanup(func() {
				if t.Failed() {
					kill := exec.Command("wineserver", "-k")
					kill.Env = winetest.Env(prefix)
					kill.Run()
				}
			})
			out, err := cmd.CombinedOutput()
			if code, cerr := winetest.ExitCode(err); cerr != nil || code != 0 {
				t.Fatalf("TestComputecoreBinding under Wine: %v\n%s", err, out)
			}
			t.Logf("under Wine:\n%s", out)
		})
	}
}
