//go:build linux

package emulation

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/winproc/winproc/internal/syncbuffer"
	"github.com/winproc/winproc/shim/compute"
)

// The backend copies Stdin into the process until EOF and then ends the
// process's input: a pipe reads every byte, then EOF; a console gets what
// a Windows console user types to end input (Ctrl-Z, Enter), so a program
// reading it line by line sees every line, then EOF.
func TestStdinEndsAtEOF(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sys := f.start(t, "stdin", &compute.Settings{Layers: f.basicLayers(t)})
	t.Cleanup(func() { sys.Terminate(ctx) })

	payload := make([]byte, 200_000)
	for i := range payload {
		payload[i] = byte(i*13 + i/509)
	}
	for _, tt := range []struct {
		name     string
		terminal bool
		in       []byte
	}{
		{"Pipe", false, payload},
		{"Terminal", true, []byte("first line\rsecond line\r")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out syncbuffer.Buffer
			p, err := sys.CreateProcess(ctx, &compute.ProcessSettings{
				CommandLine: `C:\probe.exe cat exit 0`, Terminal: tt.terminal,
				Stdin: bytes.NewReader(tt.in), Stdout: &out, Stderr: &out,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			defer func() {
				if t.Failed() {
					t.Logf("output %q", out.String())
				}
			}()
			waitFor(t, p.Wait(), 60*time.Second, "cat to reach EOF")
			if code, err := p.ExitCode(); code != 0 || err != nil {
				t.Errorf("exit %d, %v", code, err)
			}
			got := out.String()
			if !tt.terminal {
				if got != string(tt.in) {
					t.Fatalf("process echoed %d bytes, want the %d written", len(got), len(tt.in))
				}
				return
			}
			// The console echoes input and cat prints it back: each line
			// twice.
			for _, line := range []string{"first line", "second line"} {
				if n := strings.Count(got, line); n < 2 {
					t.Errorf("%q appears %d times in the console output %q, want echo and cat's copy", line, n, got)
				}
			}
		})
	}
}
