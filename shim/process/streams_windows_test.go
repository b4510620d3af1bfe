package process

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"

	"github.com/winproc/winproc/shim/compute"
)

// containerdPipe serves one stdio named pipe as containerd's Windows cio
// does, and hands over its first client.
func containerdPipe(t *testing.T, name string) (string, <-chan net.Conn) {
	t.Helper()
	path := fmt.Sprintf(`\\.\pipe\winproc-process-test-%d-%s`, time.Now().UnixNano(), name)
	l, err := winio.ListenPipe(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// As containerd's cio: no stat uses up the placeholder instance Wine 8
	// hands a ListenPipe pipe's first client; the shim's own dial does
	// under Wine (dialPipe).
	t.Cleanup(func() { l.Close() })
	conns := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(conns)
			return
		}
		t.Cleanup(func() { c.Close() })
		conns <- c
	}()
	return path, conns
}

func accepted(t *testing.T, conns <-chan net.Conn, name string) net.Conn {
	t.Helper()
	select {
	case c, ok := <-conns:
		if !ok {
			t.Fatalf("%s: accept failed", name)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("the shim never connected %s", name)
	}
	return nil
}

// The shim's end of the three stdio named pipes containerd serves for a
// process: every byte containerd writes to stdin reaches the process, then
// EOF; what the process writes reaches containerd's stdout and stderr
// pipes, and both end when the process exits.
func TestStdioNamedPipes(t *testing.T) {
	ctx := context.Background()
	stdin, stdinConns := containerdPipe(t, "stdin")
	stdout, stdoutConns := containerdPipe(t, "stdout")
	stderr, stderrConns := containerdPipe(t, "stderr")

	sys := newSystem(t)
	p := New("p1", &compute.ProcessSettings{CommandLine: `C:\app.exe`}, Stdio{Stdin: stdin, Stdout: stdout, Stderr: stderr}, Hooks{})
	if err := p.Start(ctx, sys); err != nil {
		t.Fatal(err)
	}
	fp := sys.Proc(0)
	t.Cleanup(func() { fp.Exit(0); waitExit(t, p) })

	payload := make([]byte, 200_000)
	for i := range payload {
		payload[i] = byte(i*7 + i/251)
	}
	in := accepted(t, stdinConns, "stdin")
	if _, err := in.Write(payload); err != nil {
		t.Fatalf("containerd writes stdin: %v", err)
	}
	in.Close()
	select {
	case <-fp.StdinEOF:
	case <-time.After(10 * time.Second):
		t.Fatal("the process's stdin never reached EOF")
	}
	got := fp.Stdin
	if string(got) != string(payload) {
		t.Fatalf("the process read %d bytes, want the %d containerd wrote", len(got), len(payload))
	}

	// containerd copies each output stream as it comes (Wine's pipes
	// have no buffer: a write waits for the read).
	type result struct {
		b   []byte
		err error
	}
	read := func(c net.Conn) <-chan result {
		ch := make(chan result, 1)
		go func() {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			b, err := io.ReadAll(c)
			ch <- result{b, err}
		}()
		return ch
	}
	out, errOut := read(accepted(t, stdoutConns, "stdout")), read(accepted(t, stderrConns, "stderr"))
	if _, err := fp.Settings().Stdout.Write([]byte("to stdout\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := fp.Settings().Stderr.Write([]byte("to stderr\n")); err != nil {
		t.Fatal(err)
	}
	fp.Exit(3)
	if code := waitExit(t, p); code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	for _, tc := range []struct {
		got  <-chan result
		want string
	}{{out, "to stdout\n"}, {errOut, "to stderr\n"}} {
		r := <-tc.got
		if r.err != nil || string(r.b) != tc.want {
			t.Errorf("containerd read %q, %v; want %q, then the end of the stream", r.b, r.err, tc.want)
		}
	}
}
