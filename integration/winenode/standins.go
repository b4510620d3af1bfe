//go:build linux

package winenode

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// standinDLLs are the stand-ins of testdata/standins: each implements the
// documented contract of the functions winproc and containerd.exe call in
// a DLL Wine lacks, and says in its comment what it leaves unproven.
var standinDLLs = []string{"vmcompute.dll", "bindfltapi.dll", "computecore.dll", "computenetwork.dll"}

// BuildStandins builds the stand-in DLLs with MinGW into dir.
func BuildStandins(dir string) error {
	for _, dll := range standinDLLs {
		if err := BuildStandin(dll, filepath.Join(dir, dll)); err != nil {
			return err
		}
	}
	return nil
}

// BuildStandin builds the stand-in dll with MinGW as out.
func BuildStandin(dll, out string) error {
	src := filepath.Join("testdata", "standins", strings.TrimSuffix(dll, ".dll")+".c")
	cc := exec.Command("x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-shared", "-o", out, src, "-lole32")
	if b, err := cc.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("build the stand-in %s: %w", dll, err), errors.New(string(b)))
	}
	return nil
}
