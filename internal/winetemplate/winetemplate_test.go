package winetemplate

import (
	"os"
	"path/filepath"
	"testing"
)

func TestExitLibraryIn(t *testing.T) {
	withFile, withDir := t.TempDir(), t.TempDir()
	lib := filepath.Join(withFile, ExitLibrary)
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(withDir, ExitLibrary), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ template, want string }{
		{withFile, lib},
		{withDir, ""},
		{t.TempDir(), ""},
	} {
		if got := ExitLibraryIn(tc.template); got != tc.want {
			t.Errorf("ExitLibraryIn(%s) = %q, want %q", tc.template, got, tc.want)
		}
	}
}
