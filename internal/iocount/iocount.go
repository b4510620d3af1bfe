// Package iocount counts the bytes that pass through a reader: how far
// archive/tar has read into a layer stream (snapshotter/layertar), and the
// size of the uncompressed layer the differ digests (snapshotter/differ).
package iocount

import "io"

// Reader reads from R and counts in N the bytes read so far.
type Reader struct {
	R io.Reader
	N int64
}

func (r *Reader) Read(p []byte) (int, error) {
	n, err := r.R.Read(p)
	r.N += int64(n)
	return n, err
}
