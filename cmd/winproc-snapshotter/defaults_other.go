//go:build !windows

package main

const (
	defaultRoot              = "/var/lib/winproc-snapshotter"
	defaultAddress           = "/run/winproc-snapshotter/snapshotter.sock"
	defaultContainerdAddress = "/run/containerd/containerd.sock"
	// The emulation's host is a Windows Server 2022.
	defaultHostBuild = "10.0.20348"
)
