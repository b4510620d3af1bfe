package wincat

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkRelay compares moving the same bytes over loopback TCP directly
// and through Relay. Both send size bytes from memory to an echo server and
// read the echo back into the same counting sink, over one connection each,
// so they cross the same loopback hops; the difference is Relay's own cost.
// Each iteration runs both, so drift in machine load affects them alike.
// It needs no Wine and runs on any OS.
//
// It reports direct-MB/s and relay-MB/s (counting the bytes once, not per
// direction) and ratio = relay/direct.
func BenchmarkRelay(b *testing.B) {
	const size = 64 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	port := serve(b, listen(b, "tcp4", "127.0.0.1:0"), echo)
	addr := net.JoinHostPort("127.0.0.1", port)

	runDirect := func(sink io.Writer) error { return copyDirect(addr, data, sink) }
	runRelay := func(sink io.Writer) error {
		conn, err := Dial(b.Context(), "127.0.0.1", port)
		if err != nil {
			return err
		}
		return Relay(b.Context(), conn, bytes.NewReader(data), sink)
	}
	var direct, relay time.Duration
	n := 0
	for b.Loop() {
		// Alternate which goes first, so neither always runs on a warm cache.
		if n%2 == 0 {
			direct += timed(b, runDirect)
			relay += timed(b, runRelay)
		} else {
			relay += timed(b, runRelay)
			direct += timed(b, runDirect)
		}
		n++
	}
	mb := float64(n) * size / 1e6
	b.ReportMetric(mb/direct.Seconds(), "direct-MB/s")
	b.ReportMetric(mb/relay.Seconds(), "relay-MB/s")
	b.ReportMetric(direct.Seconds()/relay.Seconds(), "ratio")
}

// timed runs f with a fresh sink and returns how long it took, failing b if
// f fails or the sink did not get size bytes.
func timed(b *testing.B, f func(sink io.Writer) error) time.Duration {
	var sink countWriter
	start := time.Now()
	err := f(&sink)
	d := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	if sink.n != 64<<20 {
		b.Fatalf("sink got %d bytes, want %d", sink.n, 64<<20)
	}
	return d
}

// copyDirect is the hand-written equivalent of Dial plus Relay: send data
// and half-close in one goroutine, receive the echo in this one.
func copyDirect(addr string, data []byte, sink io.Writer) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	sent := make(chan error, 1)
	go func() {
		_, err := io.Copy(tc, bytes.NewReader(data))
		if err == nil {
			err = tc.CloseWrite()
		}
		sent <- err
	}()
	if _, err := io.Copy(sink, tc); err != nil {
		return err
	}
	return <-sent
}

// countWriter counts and discards. Unlike io.Discard it has no ReadFrom, so
// both sides read with io.Copy's usual buffer.
type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
