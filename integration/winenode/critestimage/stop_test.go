//go:build linux

package critestimage

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestStopRightAfterStart sends the image's powershell.exe, running
// critest's pause command, CTRL_SHUTDOWN_EVENT from 0 to 200 ms after its
// start, as a container stop right after a start does through the HCS
// stand-in (HcsSignalProcess runs kernel32!CtrlRoutine in the process),
// and wants every one to exit, and the processes it started (the engine,
// ping) to end with it. With the Go engine as the first process, 10 of
// these 20 stops hung under Wine 8 and 4 left ping running
// (docs/conformance.md); Windows ends a console program that gets the
// event at any time.
func TestStopRightAfterStart(t *testing.T) {
	prefix := winetest.RootPrefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	if err := Build(ctx, ".", dir); err != nil {
		t.Fatal(err)
	}
	driver := filepath.Join(dir, "ctrlafter.exe")
	if err := buildConsole(ctx, filepath.Join("testdata", "ctrlafter.c"), driver); err != nil {
		t.Fatal(err)
	}
	delays := []string{"0", "0", "0", "0", "2", "2", "5", "5", "5", "5", "10", "10", "10", "10", "20", "20", "40", "40", "80", "200"}
	line := `"` + winetest.WinPath(filepath.Join(dir, "powershell.exe")) + `" -c "ping -t localhost"`
	out, err := winetest.Command(ctx, t, prefix, driver, append([]string{line}, delays...)...).Output()
	bad, xerr := winetest.ExitCode(err)
	if xerr != nil {
		t.Fatalf("ctrlafter.exe: %v\n%s", xerr, out)
	}
	var results []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && (f[1] == "exit" || f[1] == "hung") {
			results = append(results, strings.TrimSpace(l))
		}
	}
	if bad != 0 || len(results) != len(delays) {
		t.Fatalf("%d of %d stops right after a start hung or left processes, want none; results (delay ms, outcome, processes left):\n%s\noutput:\n%s",
			bad, len(delays), strings.Join(results, "\n"), out)
	}
}
