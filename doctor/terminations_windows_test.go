//go:build windows

package doctor

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/winproc/winproc/internal/winetest"
	"github.com/winproc/winproc/shim/record"
)

// hcsTerminations reads the HCS backend's records of pending terminates
// as its shims write them: one line each of a running shim's; a record
// left by a process that is gone is not listed.
func TestHCSTerminations(t *testing.T) {
	root := winetest.TempDir(t)
	if lines, err := hcsTerminations(root); len(lines) != 0 || err != nil {
		t.Fatalf("no records: %v, %v", lines, err)
	}
	dir := filepath.Join(root, "hcs", "terminating")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	self, err := json.Marshal(record.Self())
	if err != nil {
		t.Fatal(err)
	}
	records := map[string]string{
		"live.json": `{"id":"live","since":"2026-01-02T03:04:05Z","giveUp":"2026-01-02T03:14:05Z","attempts":4,"lastError":"HcsTerminateComputeSystem: HRESULT 0x800705B4: This operation returned because the timeout period expired.","shim":` + string(self) + `}`,
		"gone.json": `{"id":"gone","since":"2026-01-02T03:04:05Z","giveUp":"2026-01-02T03:14:05Z","attempts":2,"shim":{"pid":1073741824,"start":1}}`,
	}
	for name, body := range records {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := hcsTerminations(root)
	if err != nil || len(got) != 1 {
		t.Fatalf("hcsTerminations = %v, %v", got, err)
	}
	for _, part := range []string{"live: 4 attempts since 2026-01-02T03:04:05Z, last error: HcsTerminateComputeSystem: HRESULT 0x800705B4", "; its shim gives up at 2026-01-02T03:14:05Z"} {
		if !strings.Contains(got[0].String(), part) {
			t.Errorf("line %q lacks %q", got[0], part)
		}
	}
}
