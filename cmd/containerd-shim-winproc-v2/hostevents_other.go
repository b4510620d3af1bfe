//go:build !windows

package main

// holdThroughHostShutdown does nothing: only Windows sends console
// control events.
func holdThroughHostShutdown() error { return nil }
