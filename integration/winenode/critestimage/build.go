package critestimage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Programs are the files Build makes, the conformance image's programs.
var Programs = []string{"powershell.exe", "powershell-engine.exe", "ping.exe"}

// Build builds the conformance image's programs into dir from src, this
// package's directory: the Go programs cross-compiled for Windows, and the
// native host, with MinGW as the node's stand-ins are built.
func Build(ctx context.Context, src, dir string) error {
	goBuilds := map[string]string{"powershell-engine.exe": "powershell", "ping.exe": "ping"}
	for exe, pkg := range goBuilds {
		build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, exe), "./"+pkg)
		build.Dir = src
		build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			return errors.Join(fmt.Errorf("build the conformance image's %s: %w", exe, err), errors.New(string(out)))
		}
	}
	// A console program (wmain), as Windows' powershell.exe is.
	return buildConsole(ctx, filepath.Join(src, "host", "host.c"), filepath.Join(dir, "powershell.exe"))
}

// buildConsole builds the C source src as the Windows console program exe
// (wmain), with MinGW.
func buildConsole(ctx context.Context, src, exe string) error {
	cc := exec.CommandContext(ctx, "x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-municode", "-o", exe, src)
	if out, err := cc.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("build %s: %w", filepath.Base(exe), err), errors.New(string(out)))
	}
	return nil
}
