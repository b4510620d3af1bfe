//go:build linux

// Package integration runs winproc under the real containerd and crictl on
// an emulated Windows node (see package node).
package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// bins holds the project's Linux binaries built for this run, winBins its
// Windows programs.
var bins, winBins string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(node.ToolsEnv) == "" {
		// Every test skips, saying why.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "winproc-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bins, winBins = filepath.Join(dir, "linux"), filepath.Join(dir, "windows")
	if err := node.BuildBinaries(bins, "linux", "winproc-snapshotter", "containerd-shim-winproc-v2"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := node.BuildBinaries(winBins, "windows", "pause", "wincat", "winproc-testapp"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
