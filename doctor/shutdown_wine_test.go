//go:build linux

package doctor

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetest"
)

// TestServicesAdapterUnderWine runs the Windows test TestServicesUnderWine
// under Wine, with Wine's service manager (services.exe) and registry, in
// a private prefix: it registers services and writes PreshutdownOrder,
// which must not stay in the template.
func TestServicesAdapterUnderWine(t *testing.T) {
	template := winetest.Prefix(t)
	if os.Geteuid() != 0 {
		t.Skip("the private Wine prefix is an overlay mount, which needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	prefix := winetest.PrivatePrefix(t, template)
	exe := winetest.BuildTests(ctx, t, t.TempDir(), "doctor")
	cmd := winetest.Command(ctx, t, prefix, exe, "-test.run", "^TestServicesUnderWine$", "-test.v")
	cmd.Env = append(cmd.Env, servicesUnderWineEnv+"=1")
	out, err := cmd.CombinedOutput()
	if code, cerr := winetest.ExitCode(err); cerr != nil || code != 0 || !strings.Contains(string(out), "--- PASS: TestServicesUnderWine") {
		t.Fatalf("TestServicesUnderWine under Wine: %v\n%s", err, out)
	}
	t.Logf("under Wine:\n%s", out)
}
