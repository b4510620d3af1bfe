//go:build linux

package hcscontract

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/integration/winenode"
	"github.com/winproc/winproc/internal/winetest"
)

// TestStandinHCSContractUnderWine builds the stand-in HCS and runs this
// package's Windows tests against it under Wine, in a prefix of their own
// (the stand-in keeps its state in the prefix's ProgramData).
func TestStandinHCSContractUnderWine(t *testing.T) {
	template := winetest.Prefix(t)
	prefix := winetest.PrivatePrefix(t, template)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	if err := winenode.BuildStandinsFrom(filepath.Join("..", "testdata", "standins"), dir); err != nil {
		t.Fatal(err)
	}
	exe := winetest.BuildTests(ctx, t, dir, "hcscontract")
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, StandinEnv+"="+winetest.WinPath(filepath.Join(dir, "computecore.dll")))
	winetest.RunTests(t, "the stand-in HCS's contract", cmd)
}
