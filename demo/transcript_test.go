package demo

import (
	"strings"
	"testing"
)

// Shown commands can be pasted into a shell: programs by name, paths in
// the demo directory relative to it, quoting where the shell needs it.
func TestShellLine(t *testing.T) {
	tr := &transcript{dir: "/tmp/wpn-demo-1"}
	got := tr.shellLine([]string{"/work/bin/winproc", "image", "build", "-tree", "/tmp/wpn-demo-1/app",
		"-entrypoint", `C:\winproc-testapp.exe`, "-ref", "example.com/a:b", "-label", "it's", "/tmp/wpn-demo-1"})
	want := `winproc image build -tree app -entrypoint 'C:\winproc-testapp.exe' -ref example.com/a:b -label 'it'\''s' .`
	if got != want {
		t.Errorf("shellLine:\n got %s\nwant %s", got, want)
	}
}

func TestOutputIndents(t *testing.T) {
	var b strings.Builder
	tr := &transcript{w: &b}
	tr.output("a\r\nb\n\n")
	tr.output("")
	if got, want := b.String(), "    a\n    b\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}
