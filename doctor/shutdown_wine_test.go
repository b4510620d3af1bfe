//go:build linux

package doctor

import (
	"context"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestServicesAdapterUnderWine runs the Windows test TestServicesUnderWine
// under Wine, with Wine's service manager (services.exe) and registry, in
// a private prefix: it registers services and writes PreshutdownOrder,
// which must not stay in the template.
func TestServicesAdapterUnderWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.RootPrefix(t)
	exe := winetest.BuildTests(ctx, t, t.TempDir(), "doctor")
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestServicesUnderWine$", "-test.v")
	cmd.Env = append(cmd.Env, servicesUnderWineEnv+"=1")
	winetest.RunTests(t, "TestServicesUnderWine", cmd, "TestServicesUnderWine")
}
