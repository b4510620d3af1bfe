package winetest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RootPrefix is PrivatePrefix of the template Prefix returns; it skips the
// test unless it runs as root, which the overlay mount needs.
func RootPrefix(t testing.TB) string {
	t.Helper()
	template := Prefix(t)
	if os.Geteuid() != 0 {
		t.Skip("the private Wine prefix is an overlay mount, which needs root")
	}
	return PrivatePrefix(t, template)
}

// PrivatePrefix returns a Wine prefix of the test's own: an overlay mount
// of the template (some 700 MB) in a temporary directory, so the test can
// install DLLs in its System32 without changing the template. The mount
// needs root; the cleanup unmounts it.
func PrivatePrefix(t testing.TB, template string) string {
	t.Helper()
	dir := t.TempDir()
	prefix, upper, work := filepath.Join(dir, "prefix"), filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{prefix, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	overlay := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", template, upper, work)
	if err := unix.Mount("overlay", prefix, "overlay", 0, overlay); err != nil {
		t.Fatalf("mount a private Wine prefix over %s: %v", template, err)
	}
	t.Cleanup(func() {
		// Wine's processes may hold the prefix a moment after its
		// wineserver has exited.
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := unix.Unmount(prefix, 0)
			if err == nil {
				return
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				t.Errorf("unmount the private Wine prefix: %v", err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return prefix
}
