//go:build linux

// Package integration runs winproc under the real containerd and crictl on
// an emulated Windows node (see package node).
package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/winproc/winproc/integration/node"
)

// bins holds the project's binaries built for this run.
var bins string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv(node.ToolsEnv) == "" {
		// Every test skips, saying why.
		return m.Run()
	}
	var err error
	bins, err = node.BuildBinaries("winproc-snapshotter")
	if err != nil {
		fmt.Fprintln(os.Stderr, "build winproc binaries:", err)
		return 1
	}
	defer os.RemoveAll(bins)
	return m.Run()
}
