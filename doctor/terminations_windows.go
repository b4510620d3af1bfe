//go:build windows

package doctor

import (
	"fmt"
	"path/filepath"

	"github.com/winproc/winproc/internal/containerdnames"
	"github.com/winproc/winproc/shim/hcs"
)

// localTerminations lists the terminates the HCS backend's running shims
// carry on in the background, from the records under winproc's state root
// (containerdnames.StateRootWindows; containerd's state dir is not where
// they are).
func localTerminations(string) ([]Termination, error) {
	return hcsTerminations(containerdnames.StateRootWindows)
}

// hcsTerminations lists the terminates (hcs.PendingTerminations) under
// stateRoot: a compute system that did not stop when its pod was removed.
// One whose shim is gone is the orphans check's.
func hcsTerminations(stateRoot string) ([]Termination, error) {
	pending, err := hcs.PendingTerminations(filepath.Join(stateRoot, filepath.Base(containerdnames.ShimStateDirWindows)))
	if err != nil {
		return nil, fmt.Errorf("read the pending terminates of the HCS backend: %w", err)
	}
	var out []Termination
	for _, p := range pending {
		t := Termination{ID: p.ID, Attempts: p.Attempts, Since: p.Since, GiveUp: p.GiveUp, LastError: "none"}
		if p.LastError != nil {
			t.LastError = p.LastError.Error()
		}
		out = append(out, t)
	}
	return out, nil
}
