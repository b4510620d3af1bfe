//go:build !windows

package task

// pidsWithDetails: elsewhere (the emulation) Pids carries pids alone, as
// runc's shim does without its options: containerd's and ctr's Linux builds
// fail on an Info they cannot decode, and runhcs's ProcessDetails is not
// among theirs.
var pidsWithDetails = false
