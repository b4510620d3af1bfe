//go:build !linux && !windows

package doctor

// localLeftovers is nil: winproc has no compute backend here, so the
// orphans check does not run.
func localLeftovers() Leftovers { return nil }
