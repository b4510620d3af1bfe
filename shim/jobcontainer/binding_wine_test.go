//go:build linux

package jobcontainer

import (
	"context"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestJobObjectsUnderWine builds this package's Windows tests and runs the
// ones with real processes in real job objects (TestUnderWine...) under
// Wine: exit codes, the program's resolution, environment and directory,
// stdin, the job's process list and statistics, kill, console events,
// shutdown, terminate, kill-on-close, limits and users, all through the
// binding.
//
// It runs twice: as built, and built with a stack move at every function
// entry (runtime.mayMoreStackMove). A pointer that reaches Windows as a
// uintptr outside the system call's expression then points into a stack
// that has moved.
func TestJobObjectsUnderWine(t *testing.T) {
	prefix := winetest.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	for _, tc := range winetest.BindingBuilds {
		t.Run(tc.Name, func(t *testing.T) {
			exe := winetest.BuildTests(ctx, t, dir, tc.Name, tc.Flags...)
			cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestUnderWine", "-test.v")
			winetest.RunTests(t, "the Windows tests", cmd, "TestUnderWineKillOnJobClose")
		})
	}
}
