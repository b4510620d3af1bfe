package differ

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// The reader ahead delivers its source's bytes in order and its error
// after them, and Close returns with the source read no further, whether
// it ended or not.
func TestReadAhead(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 3*aheadChunkSize/16+5)
	broken := errors.New("broken stream")
	for _, tc := range []struct {
		name string
		src  io.Reader
		want []byte
		err  error
	}{
		{name: "empty", src: bytes.NewReader(nil), want: []byte{}},
		{name: "several chunks", src: bytes.NewReader(data), want: data},
		{name: "one byte at a time", src: iotest.OneByteReader(bytes.NewReader(data[:3000])), want: data[:3000]},
		{name: "error after data", src: io.MultiReader(bytes.NewReader(data), iotest.ErrReader(broken)), want: data, err: broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := readAhead(tc.src)
			defer a.Close()
			var got bytes.Buffer
			_, err := io.Copy(&got, iotest.OneByteReader(io.LimitReader(a, 1<<10)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = io.CopyBuffer(&got, a, make([]byte, 1000))
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if !bytes.Equal(got.Bytes(), tc.want) {
				t.Fatalf("read %d bytes, want %d (equal: %v)", got.Len(), len(tc.want), bytes.Equal(got.Bytes(), tc.want[:min(got.Len(), len(tc.want))]))
			}
		})
	}
}

func TestReadAheadCloseEarly(t *testing.T) {
	r, w := io.Pipe()
	go func() {
		for {
			if _, err := w.Write(make([]byte, 4096)); err != nil {
				return
			}
		}
	}()
	a := readAhead(r)
	if _, err := io.ReadFull(a, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	// The source still has data: Close returns once the reading stops
	// (the pipe is closed so that the read in progress ends).
	go func() { r.CloseWithError(errors.New("closed")) }()
	a.Close()
}
