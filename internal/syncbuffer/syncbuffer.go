// Package syncbuffer is a byte buffer one goroutine writes while another
// reads it: the output of a process as it runs, for tests, the demo and
// daemons' logs.
package syncbuffer

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer whose Write and String may run concurrently.
// The zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what has been written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
