//go:build !linux

package doctor

// localLeftovers is nil: on Windows the HCS backend does not yet list the
// compute systems it owns, so the orphans check does not run.
func localLeftovers() Leftovers { return nil }
