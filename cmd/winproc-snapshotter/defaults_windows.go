//go:build windows

package main

import "github.com/winproc/winproc/internal/containerdnames"

const (
	defaultRoot              = containerdnames.SnapshotterRootWindows
	defaultAddress           = containerdnames.SnapshotterAddressWindows
	defaultContainerdAddress = `\\.\pipe\containerd-containerd`
	// Empty: read the build from the operating system.
	defaultHostBuild = ""
)
