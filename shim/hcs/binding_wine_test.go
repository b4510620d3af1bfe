//go:build linux

package hcs

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestComputecoreBindingUnderWine builds the stand-in of computecore.dll
// (testdata/fakecomputecore) with MinGW and runs this package's Windows
// test TestComputecoreBinding under Wine against it: the binding's system
// calls, callbacks and pipe handles, which nothing else runs.
//
// It runs twice: as built, and built with a stack move at every function
// entry (runtime.mayMoreStackMove). A pointer that reaches the DLL as a
// uintptr outside the system call's expression then points into a stack
// that has moved, and the DLL's writes are lost or land in freed memory.
func TestComputecoreBindingUnderWine(t *testing.T) {
	prefix := winetest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	dll := filepath.Join(dir, "computecore.dll")
	cc := exec.CommandContext(ctx, "x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-shared", "-o", dll, filepath.Join("testdata", "fakecomputecore", "computecore.c"))
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in of computecore.dll: %v\n%s", err, b)
	}
	for _, tc := range winetest.BindingBuilds {
		t.Run(tc.Name, func(t *testing.T) {
			exe := winetest.BuildTests(ctx, t, dir, tc.Name, tc.Flags...)
			cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestComputecore(Binding|Faults|Enumerate)$", "-test.v")
			cmd.Env = append(cmd.Env, "WINPROC_FAKE_COMPUTECORE="+winPath(dll))
			out, err := cmd.CombinedOutput()
			if code, cerr := winetest.ExitCode(err); cerr != nil || code != 0 {
				t.Fatalf("TestComputecoreBinding under Wine: %v\n%s", err, out)
			}
			t.Logf("under Wine:\n%s", out)
		})
	}
}
