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
var standinDLLs = []string{"vmcompute.dll", "bindfltapi.dll"}

// BuildStandins builds the stand-in DLLs with MinGW into dir.
func BuildStandins(dir string) error {
	for _, dll := range standinDLLs {
		src := filepath.Join("testdata", "standins", strings.TrimSuffix(dll, ".dll")+".c")
		cc := exec.Command("x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-shared", "-o", filepath.Join(dir, dll), src)
		if out, err := cc.CombinedOutput(); err != nil {
			return errors.Join(fmt.Errorf("build the stand-in %s: %w", dll, err), errors.New(string(out)))
		}
	}
	return nil
}
