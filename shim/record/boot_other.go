//go:build !windows

package record

// bootTime is unknown off Windows: a Shim's Start counts from the boot
// (Linux clock ticks), so a record of an earlier boot cannot be told
// apart by it.
func bootTime() (uint64, bool) { return 0, false }
