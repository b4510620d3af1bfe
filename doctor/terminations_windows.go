//go:build windows

package doctor

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/hcs"
)

// hcsTerminations lists the terminates the HCS backend's running shims
// carry on in the background (hcs.PendingTerminations), one line each,
// from the records under winproc's state root
// (containerdnames.StateRootWindows): a compute system that did not stop
// when its pod was removed. One whose shim is gone is the orphans
// check's.
func hcsTerminations(ctx context.Context, stateRoot string) ([]string, error) {
	pending, err := hcs.PendingTerminations(filepath.Join(stateRoot, filepath.Base(containerdnames.ShimStateDirWindows)))
	if err != nil {
		return nil, fmt.Errorf("read the pending terminates of the HCS backend: %w", err)
	}
	var out []string
	for _, p := range pending {
		line := fmt.Sprintf("compute system %s: terminating since %s (%s), %d attempts", p.ID, p.Since.Format(time.RFC3339), time.Since(p.Since).Round(time.Second), p.Attempts)
		if p.LastError != nil {
			line += ", last error: " + p.LastError.Error()
		}
		line += fmt.Sprintf("; its shim gives up at %s", p.GiveUp.Format(time.RFC3339))
		out = append(out, line)
	}
	return out, nil
}
