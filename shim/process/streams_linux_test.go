package process

import (
	"context"
	"io"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/fifo"
)

// Output written while containerd is away (no reader on the fifo) waits in
// the fifo and reaches containerd when it reopens it.
func TestStdoutSurvivesReaderRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "stdout")
	open := func() io.ReadCloser {
		r, err := fifo.OpenFifo(ctx, path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	containerd := open()
	s, err := openStreams(ctx, Stdio{Stdout: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	containerd.Close() // containerd restarts
	if _, err := s.stdout.Write([]byte("while away\n")); err != nil {
		t.Fatalf("write with containerd away: %v", err)
	}
	containerd = open()
	defer containerd.Close()
	got := make([]byte, 64)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		n, _ := containerd.Read(got)
		if n > 0 {
			if string(got[:n]) != "while away\n" {
				t.Fatalf("read %q", got[:n])
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("output written while containerd was away never arrived")
}
