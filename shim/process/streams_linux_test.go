package process

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/fifo"
	"golang.org/x/sys/unix"

	"github.com/winproc/winproc/shim/compute"
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

// CloseIO means the client has written all its input: the process reads
// every byte written before it, then EOF, whether CloseIO comes before the
// process starts, while the client's end is still open, or after the client
// closed it; with or without a terminal.
func TestStdinEveryByteThenEOF(t *testing.T) {
	payload := make([]byte, 200_000)
	for i := range payload {
		payload[i] = byte(i*7 + i/251)
	}
	for _, tt := range []struct {
		name string
		// closeIO runs CloseIO around the client's writes: before Start,
		// after the last write with the client's end still open, or once
		// the client closed its end.
		when string
	}{
		{"BeforeStart", "before-start"},
		{"WhileClientOpen", "client-open"},
		{"AfterClientClosed", "client-closed"},
	} {
		for _, terminal := range []bool{false, true} {
			name := tt.name
			if terminal {
				name += "/Terminal"
			}
			t.Run(name, func(t *testing.T) {
				ctx := context.Background()
				client := openClientEnd(t)
				sys := newSystem(t)
				p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`, Terminal: terminal}, Stdio{Stdin: client.Name(), Terminal: terminal}, Hooks{})
				if tt.when == "before-start" {
					if err := p.CloseStdin(ctx); err != nil {
						t.Fatalf("CloseIO before start: %v", err)
					}
				}
				if err := p.Start(ctx, sys); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { sys.Proc(0).Exit(0); waitExit(t, p) })
				written := make(chan error, 1)
				go func() {
					_, err := client.Write(payload)
					written <- err
				}()
				if err := <-written; err != nil {
					t.Fatalf("client write: %v", err)
				}
				switch tt.when {
				case "client-open":
					if err := p.CloseStdin(ctx); err != nil {
						t.Fatal(err)
					}
					client.Close()
				case "client-closed", "before-start":
					client.Close()
					if err := p.CloseStdin(ctx); err != nil && tt.when != "before-start" {
						t.Fatal(err)
					}
				}
				fp := sys.Proc(0)
				select {
				case <-fp.StdinEOF:
				case <-time.After(10 * time.Second):
					t.Fatal("stdin never reached EOF after CloseIO")
				}
				got := fp.Stdin
				if len(got) != len(payload) || string(got) != string(payload) {
					t.Fatalf("process read %d bytes, want the %d written before CloseIO", len(got), len(payload))
				}
			})
		}
	}
}

// openClientEnd makes a stdin fifo and opens containerd's client end of it
// for writing, as containerd's cio has before it asks the shim to start a
// process: the end is open (counted as a writer) before the shim opens its
// own, so the test does not depend on when an asynchronous open completes.
func openClientEnd(t *testing.T) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "stdin")
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// A write-only open waits for a reader: lend it one.
	reader, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	client, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

// Until CloseIO, stdin does not end, even when the client closes its end
// (containerd restarting, or an attach that ends): another client may
// still write.
func TestStdinOpenUntilCloseIO(t *testing.T) {
	ctx := context.Background()
	client := openClientEnd(t)
	path := client.Name()
	sys := newSystem(t)
	p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{Stdin: path}, Hooks{})
	if err := p.Start(ctx, sys); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Proc(0).Exit(0); waitExit(t, p) })
	if _, err := client.Write([]byte("first ")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	fp := sys.Proc(0)
	select {
	case <-fp.StdinEOF:
		t.Fatal("stdin ended when a client closed its end, before CloseIO")
	case <-time.After(200 * time.Millisecond):
	}
	again, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fp.StdinEOF:
	case <-time.After(10 * time.Second):
		t.Fatal("no EOF after CloseIO")
	}
	if got := string(fp.Stdin); got != "first second" {
		t.Fatalf("process read %q", got)
	}
}

// A terminal process's stderr path (containerd's Linux cio names one for
// terminals too) is ignored: a console has one output stream.
func TestTerminalIgnoresStderr(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	stdout, stderr := filepath.Join(dir, "stdout"), filepath.Join(dir, "stderr")
	for _, path := range []string{stdout, stderr} {
		r, err := fifo.OpenFifo(ctx, path, syscall.O_RDONLY|syscall.O_CREAT|syscall.O_NONBLOCK, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
	}
	sys := newSystem(t)
	p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`, Terminal: true}, Stdio{Stdout: stdout, Stderr: stderr, Terminal: true}, Hooks{})
	if err := p.Start(ctx, sys); err != nil {
		t.Fatalf("a terminal process with a stderr path: %v", err)
	}
	t.Cleanup(func() { sys.Proc(0).Exit(0); waitExit(t, p) })
	if ps := sys.Proc(0).Settings(); ps.Stdout == nil || ps.Stderr != nil {
		t.Errorf("terminal process streams: stdout %v, stderr %v; want stdout only", ps.Stdout, ps.Stderr)
	}
	if st := p.State(); st.Stdio.Stderr != stderr {
		t.Errorf("state reports stderr %q, want the path containerd gave", st.Stdio.Stderr)
	}
}
