//go:build !windows

package doctor

// localServices is nil: only Windows has the service manager whose
// shutdown order the check reads.
func localServices() Services { return nil }
