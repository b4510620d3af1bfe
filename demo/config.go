// Package demo is `make demo`: winproc end to end on an emulated Windows
// node, printed as a terminal transcript. It starts the pinned containerd
// with the config the project generates and winproc-snapshotter, builds the
// pause and test-app images with `winproc image`, imports them, runs a pod
// through crictl, starts the test app in it, shows its logs, execs into
// it, fetches a page through wincat (the port-forward path), shows the
// pod's statistics, and tears everything down.
//
// Everything the demo makes lives in one temporary directory; daemons,
// shims, Wine processes and mounts are stopped, unmounted and removed when
// it ends, whether it succeeded or not. It runs on Linux only (the Wine
// emulation backend), as root.
package demo

import "io"

// Config says where the demo finds what it runs.
type Config struct {
	// Tools holds containerd, ctr and crictl (`make tools`).
	Tools string
	// WinePrefix is the template Wine prefix (`make wine`).
	WinePrefix string
	// Bin holds the Linux binaries containerd-shim-winproc-v2,
	// winproc-snapshotter and winproc (`make build`); empty: the demo
	// builds them with `go build` from the module in the working directory.
	Bin string
	// WindowsBin holds pause.exe, wincat.exe and winproc-testapp.exe
	// (`make windows`); empty: the demo builds them.
	WindowsBin string
	// Out receives the transcript.
	Out io.Writer
}
