// Package winetest runs the project's Windows programs under Wine from Linux
// tests: it cross-compiles a main package to a PE executable and prepares
// commands that run it in the template Wine prefix made by `make wine`.
//
// Tests that need Wine call Prefix, which skips the test when
// WINPROC_WINE_PREFIX is unset; `make test` always sets it, so in CI these
// tests run.
package winetest

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/winetemplate"
)

// PrefixEnv names the environment variable that holds the template prefix.
const PrefixEnv = "WINPROC_WINE_PREFIX"

// Prefix returns the template Wine prefix, skipping the test when there is none.
func Prefix(t testing.TB) string {
	t.Helper()
	p := os.Getenv(PrefixEnv)
	if p == "" {
		t.Skipf("%s is not set; run through `make test` or set it to a prefix made by `make wine`", PrefixEnv)
	}
	if _, err := os.Stat(filepath.Join(p, "system.reg")); err != nil {
		t.Fatalf("%s=%s is not a Wine prefix (run `make wine`): %v", PrefixEnv, p, err)
	}
	return p
}

// Env returns the environment for Wine processes in prefix: quiet, and
// without the Mono and Gecko installers Wine would otherwise offer.
func Env(prefix string) []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WINEPREFIX=") && !strings.HasPrefix(kv, "WINEDEBUG=") && !strings.HasPrefix(kv, "WINEDLLOVERRIDES=") {
			env = append(env, kv)
		}
	}
	return append(env, "WINEPREFIX="+prefix, "WINEDEBUG=-all", "WINEDLLOVERRIDES=mscoree,mshtml=")
}

// BuildExe cross-compiles the main package pkg (an import path or a
// directory) for windows/amd64 into a temporary directory and returns the
// path of the .exe.
func BuildExe(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(pkg)+".exe")
	cmd := exec.Command(goTool(), "build", "-o", out, pkg)
	cmd.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s for windows: %v\n%s", pkg, err, b)
	}
	return out
}

// MoveStacks builds a program that moves its goroutine's stack at every
// function entry: a pointer handed to a DLL as a uintptr outside the
// system call's expression then points into a stack that has moved (Go's
// unsafe.Pointer rule 4), where an ordinary build almost never shows it.
const MoveStacks = "-gcflags=all=-d=maymorestack=runtime.mayMoreStackMove"

// BindingBuilds are the builds a DLL binding's Windows tests run in: as
// built, and with MoveStacks.
var BindingBuilds = []struct {
	Name  string
	Flags []string
}{
	{"as built", nil},
	{"stack moved at every call", []string{MoveStacks}},
}

// BuildTests cross-compiles the Windows tests of the package in the
// current directory, with flags, into dir and returns the .exe's path.
func BuildTests(ctx context.Context, t testing.TB, dir, name string, flags ...string) string {
	t.Helper()
	exe := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".test.exe")
	args := append(append([]string{"test", "-c", "-o", exe}, flags...), ".")
	build := exec.CommandContext(ctx, goTool(), args...)
	build.Env = append(os.Environ(), "GOOS=windows", "GOARCH=amd64", "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the Windows tests: %v\n%s", err, b)
	}
	return exe
}

// Command returns a command that runs exe under Wine in prefix. The caller
// starts it; once the test is done, a cleanup (one per test and prefix)
// waits for the prefix's wineserver to exit, so no Wine process outlives the
// test.
//
// A process that starts the prefix's wineserver passes its stderr on to it
// (the server keeps descriptor 2 open), so Wait does not wait for the
// command's pipes to close longer than WaitDelay after the process exited:
// then it returns exec.ErrWaitDelay for a zero exit status (ExitCode reads
// it as 0).
func Command(ctx context.Context, t testing.TB, prefix, exe string, args ...string) *exec.Cmd {
	t.Helper()
	// setarch -R, as the emulation does: a randomized heap can take the
	// fixed address of Wine's shared user data (shim/emulation doc.go).
	cmd := exec.CommandContext(ctx, "setarch", append([]string{"-R", "wine", exe}, args...)...)
	// The exit library, as the emulation has: without it about 1 graceful
	// exit in 80 after a console event hangs (build/wine/wineexit.c).
	lib := winetemplate.ExitLibraryIn(prefix)
	if lib == "" {
		t.Fatalf("template prefix %s has no %s: run `make wine`", prefix, winetemplate.ExitLibrary)
	}
	cmd.Env = append(Env(prefix), "LD_PRELOAD="+lib)
	cmd.WaitDelay = WaitDelay
	waitServerOnce(t, prefix)
	return cmd
}

// WaitDelay bounds the wait for a Command's pipes after its process exited;
// the program's output is read long before.
const WaitDelay = 250 * time.Millisecond

// ExitCode returns the exit status of a Command from what its Wait or Run
// returned, or the error if it did not exit.
func ExitCode(err error) (int, error) {
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
		return 0, nil
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode(), nil
	}
	return 0, err
}

// waiting holds the tests and prefixes that have a WaitServer cleanup: a
// wait lasts until the wineserver has gone idle and exited, seconds (a test
// of 200 commands with a wait each took 480 s), so a test waits once.
var waiting sync.Map

type testPrefix struct {
	t      testing.TB
	prefix string
}

func waitServerOnce(t testing.TB, prefix string) {
	key := testPrefix{t, prefix}
	if _, loaded := waiting.LoadOrStore(key, true); loaded {
		return
	}
	t.Cleanup(func() {
		waiting.Delete(key)
		WaitServer(t, prefix)
	})
}

// WaitServer waits until the wineserver of prefix has exited.
func WaitServer(t testing.TB, prefix string) {
	t.Helper()
	cmd := exec.Command("wineserver", "-w")
	cmd.Env = Env(prefix)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("wineserver -w: %v\n%s", err, b)
	}
}

// TempDir is t.TempDir for tests that also run under Wine as Windows test
// binaries: Go's os.RemoveAll fails there with "Invalid function" where
// os.Remove works, so the directory is removed entry by entry, the
// deepest first, without failing the test.
func TempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "winproc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var paths []string
		filepath.WalkDir(dir, func(path string, _ fs.DirEntry, _ error) error {
			paths = append(paths, path)
			return nil
		})
		for i := len(paths) - 1; i >= 0; i-- {
			os.Remove(paths[i])
		}
	})
	return dir
}

func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// BuildDLL builds the stand-in DLL of the MinGW source src as dll, as the
// Windows node builds its stand-ins (integration/winenode standins.go).
func BuildDLL(ctx context.Context, t testing.TB, src, dll string) {
	t.Helper()
	cc := exec.CommandContext(ctx, "x86_64-w64-mingw32-gcc", "-O2", "-Wall", "-Werror", "-shared", "-o", dll, src, "-lole32")
	if b, err := cc.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in %s: %v\n%s", filepath.Base(dll), err, b)
	}
}

// RunTests runs cmd, a Command of a Windows test binary, and fails t,
// naming what ran, unless it exits with status 0 and its output has the
// line "--- PASS: name" of each of mustPass (a test the binary must not
// skip). It logs the output and returns it for further checks.
func RunTests(t testing.TB, what string, cmd *exec.Cmd, mustPass ...string) string {
	t.Helper()
	b, err := cmd.CombinedOutput()
	out := string(b)
	if code, cerr := ExitCode(err); cerr != nil || code != 0 {
		t.Fatalf("%s under Wine: %v\n%s", what, err, out)
	}
	for _, name := range mustPass {
		if !strings.Contains(out, "--- PASS: "+name) {
			t.Fatalf("%s under Wine: %s did not pass\n%s", what, name, out)
		}
	}
	t.Logf("under Wine:\n%s", out)
	return out
}

// WinPath is the Windows name Wine gives the Linux path p: on drive Z:.
func WinPath(p string) string { return "Z:" + strings.ReplaceAll(p, "/", `\`) }
