//go:build !windows

package record

import "os"

// openRecord opens a record for reading; rename puts a written one in
// place. Elsewhere than on Windows an open file neither holds off a
// rename nor is held off by one.
func openRecord(path string) (*os.File, error) { return os.Open(path) }

func rename(from, to string) error { return os.Rename(from, to) }
