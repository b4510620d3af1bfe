package record

// BootedSince reports whether the node has booted since the shim s
// started: what s held only until a reboot (a layer's activation and
// preparation, bind filter mappings) is gone, whatever the functions that
// release it answer now. False when either time is unknown.
func BootedSince(s Shim) bool {
	if s.Start == 0 {
		return false
	}
	boot, ok := bootTime()
	return ok && boot > s.Start
}
