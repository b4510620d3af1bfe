package wincat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// These tests run on Linux and, cross-compiled, under Wine; so they use
// loopback TCP and in-memory stdio only, and no t.TempDir.

func TestRunBadArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // in the one stderr line
	}{
		{"no args", nil, "usage: wincat <host> <port>"},
		{"one arg", []string{"127.0.0.1"}, "usage: wincat <host> <port>"},
		{"three args", []string{"127.0.0.1", "80", "x"}, "usage: wincat <host> <port>"},
		{"port not a number", []string{"127.0.0.1", "abc"}, `invalid port "abc"`},
		{"port zero", []string{"127.0.0.1", "0"}, `invalid port "0"`},
		{"port too big", []string{"127.0.0.1", "70000"}, `invalid port "70000"`},
		{"port negative", []string{"127.0.0.1", "-1"}, `invalid port "-1"`},
		{"port empty", []string{"127.0.0.1", ""}, `invalid port ""`},
		{"host empty", []string{"", "80"}, "invalid host"},
		{"host unresolvable", []string{"no-such-host.invalid", "80"}, "no-such-host.invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, strings.NewReader(""), tt.args...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want none", stdout)
			}
			checkLine(t, stderr, tt.want)
		})
	}
}

func TestParsePort(t *testing.T) {
	for in, want := range map[string]string{"1": "1", "80": "80", "080": "80", "65535": "65535"} {
		if got, err := parsePort(in); got != want || err != nil {
			t.Errorf("parsePort(%q) = %q, %v; want %q, nil", in, got, err, want)
		}
	}
	for _, in := range []string{"+80", "0x50", "8_0", " 80", "65536"} {
		if got, err := parsePort(in); err == nil {
			t.Errorf("parsePort(%q) = %q, nil; want an error", in, got)
		}
	}
}

func TestEcho(t *testing.T) {
	port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), echo)
	big := make([]byte, 4<<20)
	for i := range big {
		big[i] = byte(i * 7 / 3)
	}
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"short", "hello, wincat\n"},
		{"4MiB", string(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, strings.NewReader(tt.in), "127.0.0.1", port)
			if code != 0 || stderr != "" {
				t.Fatalf("exit status %d, stderr %q; want 0 and none", code, stderr)
			}
			if stdout != tt.in {
				t.Errorf("stdout has %d bytes, want the %d sent", len(stdout), len(tt.in))
			}
		})
	}
}

// TestHalfClose checks that the end of stdin reaches the server as EOF while
// the connection stays open for the server's reply.
func TestHalfClose(t *testing.T) {
	port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), func(c *net.TCPConn) {
		req, err := io.ReadAll(c) // returns only on EOF
		if err != nil {
			t.Errorf("server: read request: %v", err)
			return
		}
		if _, err := io.WriteString(c, "after EOF: "+string(req)); err != nil {
			t.Errorf("server: write reply: %v", err)
		}
	})
	code, stdout, stderr := run(t, strings.NewReader("request"), "127.0.0.1", port)
	if code != 0 || stderr != "" {
		t.Fatalf("exit status %d, stderr %q; want 0 and none", code, stderr)
	}
	if want := "after EOF: request"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
}

// TestRemoteCloseEndsRelay checks that wincat finishes once the server has
// closed, without waiting for stdin, which here never ends.
func TestRemoteCloseEndsRelay(t *testing.T) {
	port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), func(c *net.TCPConn) {
		io.WriteString(c, "bye")
	})
	stdin, w := io.Pipe()
	t.Cleanup(func() { w.Close() }) // lets the stdin copy finish
	code, stdout, stderr := run(t, stdin, "127.0.0.1", port)
	if code != 0 || stderr != "" || stdout != "bye" {
		t.Errorf("exit status %d, stdout %q, stderr %q; want 0, %q, none", code, stdout, stderr, "bye")
	}
}

// TestIPv6Loopback checks that "localhost" reaches a listener bound only to
// ::1, and that IPv6 literals work with or without brackets.
func TestIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	port := serve(t, ln, echo)
	for _, host := range []string{"localhost", "::1", "[::1]"} {
		t.Run(host, func(t *testing.T) {
			code, stdout, stderr := run(t, strings.NewReader("ping"), host, port)
			if code != 0 || stderr != "" || stdout != "ping" {
				t.Errorf("exit status %d, stdout %q, stderr %q; want 0, %q, none", code, stdout, stderr, "ping")
			}
		})
	}
}

func TestConnectRefused(t *testing.T) {
	port := closedPort(t)
	tests := []struct {
		host string
		want []string // each in the stderr line
	}{
		{"127.0.0.1", []string{"wincat: connect 127.0.0.1:" + port + ": "}},
		{"localhost", []string{"connect 127.0.0.1:" + port + ": ", "; connect [::1]:" + port + ": "}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			code, stdout, stderr := run(t, strings.NewReader("unsent"), tt.host, port)
			if code != 1 || stdout != "" {
				t.Errorf("exit status %d, stdout %q; want 1 and none", code, stdout)
			}
			checkLine(t, stderr, tt.want...)
			if runtime.GOOS == "linux" {
				checkLine(t, stderr, "connection refused")
			}
		})
	}
}

func TestCopyErrors(t *testing.T) {
	t.Run("stdout", func(t *testing.T) {
		port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), func(c *net.TCPConn) {
			io.WriteString(c, "data")
			io.Copy(io.Discard, c)
		})
		stdout := errWriter{errors.New("stdout is broken")}
		code, stderr := runWith(t, strings.NewReader(""), stdout, "127.0.0.1", port)
		if code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		checkLine(t, stderr, "wincat: copy socket to stdout: ", "stdout is broken")
	})

	t.Run("stdin", func(t *testing.T) {
		serverErr := make(chan error, 1)
		port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), func(c *net.TCPConn) {
			_, err := io.ReadAll(c)
			serverErr <- err
		})
		stdin := io.MultiReader(strings.NewReader("partial"), errReader{errors.New("stdin is broken")})
		code, stdout, stderr := run(t, stdin, "127.0.0.1", port)
		if code != 1 || stdout != "" {
			t.Errorf("exit status %d, stdout %q; want 1 and none", code, stdout)
		}
		checkLine(t, stderr, "wincat: copy stdin to socket: ", "stdin is broken")
		// The server must not mistake the truncated input for all of it.
		if err := <-serverErr; err == nil {
			if underWine() {
				t.Log("server read a clean EOF: Wine 8 reports a reset as EOF")
			} else {
				t.Error("server read a clean EOF, want a reset connection")
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		port := serve(t, listen(t, "tcp4", "127.0.0.1:0"), func(c *net.TCPConn) {
			io.WriteString(c, "x")
			io.Copy(io.Discard, c)
		})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// Cancel once the relay is surely running: when the server's first
		// byte reaches stdout.
		stdout := writerFunc(func(p []byte) (int, error) { cancel(); return len(p), nil })
		stdin, w := io.Pipe()
		t.Cleanup(func() { w.Close() })
		var stderr bytes.Buffer
		if code := Run(ctx, []string{"127.0.0.1", port}, stdin, stdout, &stderr); code != 1 {
			t.Errorf("exit status %d, want 1", code)
		}
		checkLine(t, stderr.String(), "wincat: relay cancelled: context canceled")
	})
}

// run runs wincat with args and returns its exit status and output. A
// deadline keeps a hung relay from hanging the test binary.
func run(t *testing.T, stdin io.Reader, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out bytes.Buffer
	code, stderr = runWith(t, stdin, &out, args...)
	return code, out.String(), stderr
}

func runWith(t *testing.T, stdin io.Reader, stdout io.Writer, args ...string) (code int, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var errb bytes.Buffer
	code = Run(ctx, args, stdin, stdout, &errb)
	return code, errb.String()
}

// checkLine checks that s is exactly one line containing each of want.
func checkLine(t *testing.T, s string, want ...string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("stderr %q, want one line", s)
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("stderr %q, want it to contain %q", s, w)
		}
	}
}

func listen(tb testing.TB, network, addr string) net.Listener {
	tb.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// serve runs handle for each connection to ln, closing the connection after,
// and returns ln's port. Cleanup closes ln and any open connections and
// waits for the handlers.
func serve(tb testing.TB, ln net.Listener, handle func(*net.TCPConn)) (port string) {
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = true
			mu.Unlock()
			wg.Go(func() {
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c.(*net.TCPConn))
			})
		}
	})
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port
}

// echo sends back what it reads, then half-closes.
func echo(c *net.TCPConn) {
	if _, err := io.Copy(c, c); err == nil {
		c.CloseWrite()
	}
}

// closedPort returns a loopback port with no listener.
func closedPort(tb testing.TB) string {
	ln := listen(tb, "tcp4", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
