//go:build !linux && !windows

package doctor

// localTerminations lists none: only the Linux emulation and the HCS
// backend carry teardowns on in the background.
func localTerminations(string) ([]Termination, error) { return nil, nil }
