package differ

import (
	"io"
	"sync"
)

// Reading a layer (from containerd's content store, over gRPC),
// decompressing it and hashing it run in a goroutine of their own, up to
// aheadChunks chunks of aheadChunkSize ahead of the import: on a node with
// two cores, decompression and the import's file creation overlap instead
// of taking turns.
const (
	aheadChunks    = 8
	aheadChunkSize = 1 << 20
)

// aheadReader reads its source ahead in a goroutine.
type aheadReader struct {
	full chan chunk
	free chan []byte
	stop chan struct{}
	done chan struct{}
	once sync.Once
	cur  []byte // the unread part of buf
	buf  []byte
	err  error
}

type chunk struct {
	data []byte
	err  error
}

// readAhead starts reading r; Close stops it.
func readAhead(r io.Reader) *aheadReader {
	a := &aheadReader{
		full: make(chan chunk, aheadChunks),
		free: make(chan []byte, aheadChunks+1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	for range aheadChunks + 1 {
		a.free <- make([]byte, aheadChunkSize)
	}
	go a.fill(r)
	return a
}

func (a *aheadReader) fill(r io.Reader) {
	defer close(a.done)
	defer close(a.full)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			return
		}
		n := 0
		var err error
		for n < len(buf) && err == nil {
			var nr int
			nr, err = r.Read(buf[n:])
			n += nr
		}
		if n > 0 {
			select {
			case a.full <- chunk{data: buf[:n]}:
			case <-a.stop:
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				select {
				case a.full <- chunk{err: err}:
				case <-a.stop:
				}
			}
			return
		}
	}
}

func (a *aheadReader) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.err != nil {
			return 0, a.err
		}
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)]
			a.buf = nil
		}
		c, ok := <-a.full
		switch {
		case !ok:
			a.err = io.EOF
		case c.err != nil:
			a.err = c.err
		default:
			a.buf, a.cur = c.data, c.data
		}
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Close stops reading ahead and waits until the source is no longer read,
// so that it can be closed.
func (a *aheadReader) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
