//go:build linux

package winenode

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// standinDLLs are the stand-ins of testdata/standins, installed in the
// node's System32: each implements the documented contract of the
// functions winproc and containerd.exe call in a DLL Wine lacks, and says
// in its comment what it leaves unproven. computecore.dll is the client of
// the stand-in HCS service, computecore-service.exe, which it starts from
// its own directory.
var standinDLLs = []string{"vmcompute.dll", "bindfltapi.dll", "computecore.dll", "computenetwork.dll", HCSService}

// HCSService is the stand-in HCS service's executable.
const HCSService = "computecore-service.exe"

// standinSources are the sources of a stand-in built from more than its
// own name's .c.
var standinSources = map[string][]string{
	"computecore.dll": {"computecore.c", "hcsclient.c"},
	HCSService:        {"hcsservice.c", "hcssystem.c", "hcsprocess.c", "hcshold.c", "hcsenv.c"},
}

// KubeletStandin is the stand-in pdh.dll (testdata/standins/pdh.c), which
// the node loads for kubelet.exe alone, in place of Wine's own (kubelet.go).
const KubeletStandin = "pdh.dll"

// standinLibs are the import libraries a stand-in links beyond ole32.
var standinLibs = map[string][]string{
	KubeletStandin: {"-liphlpapi", "-lpsapi"},
}

// BuildStandins builds the stand-ins with MinGW into dir.
func BuildStandins(dir string) error {
	return BuildStandinsFrom(filepath.Join("testdata", "standins"), dir)
}

// BuildStandinsFrom builds the stand-ins of the sources in src into dir.
func BuildStandinsFrom(src, dir string) error {
	for _, name := range append(standinDLLs, KubeletStandin) {
		if err := buildStandin(src, dir, name); err != nil {
			return err
		}
	}
	return nil
}

// BuildStandin builds the stand-in name of testdata/standins into dir.
func BuildStandin(name, dir string) error {
	return buildStandin(filepath.Join("testdata", "standins"), dir, name)
}

func buildStandin(src, dir, name string) error {
	srcs := standinSources[name]
	if srcs == nil {
		srcs = []string{strings.TrimSuffix(name, filepath.Ext(name)) + ".c"}
	}
	args := []string{"-O2", "-Wall", "-Werror", "-o", filepath.Join(dir, name)}
	if filepath.Ext(name) == ".exe" {
		// A service: no console of its own, wWinMain.
		args = append(args, "-municode", "-mwindows")
	} else {
		args = append(args, "-shared")
	}
	for _, s := range srcs {
		args = append(args, filepath.Join(src, s))
	}
	args = append(append(args, "-lole32"), standinLibs[name]...)
	cc := exec.Command("x86_64-w64-mingw32-gcc", args...)
	if out, err := cc.CombinedOutput(); err != nil {
		return errors.Join(fmt.Errorf("build the stand-in %s: %w", name, err), errors.New(string(out)))
	}
	return nil
}
