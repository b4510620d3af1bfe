// Package version holds the version every winproc binary reports. The
// Makefile sets Version from `git describe` at link time.
package version

// Version is the winproc release, "dev" in an unstamped build.
var Version = "dev"
