//go:build windows

package record

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// On Windows a record rewritten while another process reads it would fail
// both ways: os.Open does not share delete, so the writer's rename over
// the open record is refused (access denied), and a reader opening it
// while the rename replaces it meets a sharing violation. So a record is
// opened sharing read, write and delete, and an open or rename refused so
// is tried again for up to retryFor.

const (
	retryFor   = time.Second
	retryEvery = 10 * time.Millisecond
)

// refused is an error that a moment later may be gone: the file is held
// or being replaced by another process.
func refused(err error) bool {
	return errors.Is(err, windows.ERROR_SHARING_VIOLATION) || errors.Is(err, windows.ERROR_ACCESS_DENIED)
}

// retry runs f until it succeeds, fails otherwise than refused, or
// retryFor has passed.
func retry(f func() error) error {
	deadline := time.Now().Add(retryFor)
	for {
		err := f()
		if err == nil || !refused(err) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(retryEvery)
	}
}

func openRecord(path string) (*os.File, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	var h windows.Handle
	err = retry(func() error {
		var err error
		h, err = windows.CreateFile(p, windows.GENERIC_READ, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE, nil, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL, 0)
		return err
	})
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(h), path), nil
}

func rename(from, to string) error {
	return retry(func() error { return os.Rename(from, to) })
}
