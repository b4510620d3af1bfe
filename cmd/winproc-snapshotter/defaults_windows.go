//go:build windows

package main

const (
	defaultRoot              = `C:\ProgramData\winproc\snapshotter`
	defaultAddress           = `\\.\pipe\winproc-snapshotter`
	defaultContainerdAddress = `\\.\pipe\containerd-containerd`
	// Empty: read the build from the operating system.
	defaultHostBuild = ""
)
