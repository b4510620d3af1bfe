//go:build windows

package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/winproc/winproc/shim/compute"
	"github.com/winproc/winproc/shim/hcs"
	"github.com/winproc/winproc/shim/options"
	"github.com/winproc/winproc/winbuild"
)

// stateDir is where the HCS backend records each system's scratch layer, so
// that `delete` can release it after a shim died.
func stateDir() string {
	return filepath.Join(os.Getenv("ProgramData"), "winproc", "hcs")
}

func newBackend(context.Context, options.Options) (compute.Backend, error) {
	return hcs.New(hcs.Options{StateDir: stateDir()})
}

func openBackend(context.Context) (compute.Backend, error) {
	return hcs.New(hcs.Options{StateDir: stateDir()})
}

func hostBuild(options.Options) (winbuild.Version, error) {
	return winbuild.Host()
}
