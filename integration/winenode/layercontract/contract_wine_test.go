//go:build linux

package layercontract

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestStandinLayersContractUnderWine builds the stand-in vmcompute.dll and
// runs this package's Windows tests against it under Wine, in a prefix of
// their own.
func TestStandinLayersContractUnderWine(t *testing.T) {
	template := winetest.Prefix(t)
	prefix := winetest.PrivatePrefix(t, template)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	dll := filepath.Join(dir, "vmcompute.dll")
	src := filepath.Join("..", "testdata", "standins", "vmcompute.c")
	winetest.BuildDLL(ctx, t, src, dll)
	exe := winetest.BuildTests(ctx, t, dir, "layercontract")
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.v", "-test.count=1")
	cmd.Env = append(cmd.Env, standinEnv+"="+winetest.WinPath(dll), rootEnv+"="+winetest.WinPath(t.TempDir()))
	winetest.RunTests(t, "the stand-in vmcompute.dll's contract", cmd)
}
