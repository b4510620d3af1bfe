package iocount

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReaderCounts(t *testing.T) {
	tests := []struct {
		name string
		r    io.Reader
		want int64
	}{
		{"empty", strings.NewReader(""), 0},
		{"whole", strings.NewReader("hello, world"), 12},
		{"a byte at a time", iotest.OneByteReader(strings.NewReader("hello")), 5},
		{"data with the error", iotest.DataErrReader(strings.NewReader("abc")), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reader{R: tc.r}
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if r.N != tc.want || int64(len(b)) != tc.want {
				t.Errorf("N = %d after reading %d bytes, want %d", r.N, len(b), tc.want)
			}
		})
	}
}

func TestReaderCountsUpToAnError(t *testing.T) {
	r := &Reader{R: iotest.TimeoutReader(strings.NewReader("abcdef"))}
	buf := make([]byte, 4)
	if n, err := r.Read(buf); n != 4 || err != nil {
		t.Fatalf("first Read = %d, %v", n, err)
	}
	if _, err := r.Read(buf); err != iotest.ErrTimeout {
		t.Fatalf("second Read error %v, want %v", err, iotest.ErrTimeout)
	}
	if r.N != 4 {
		t.Errorf("N = %d, want 4", r.N)
	}
}
