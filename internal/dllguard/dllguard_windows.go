package dllguard

import (
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/windows"
)

// Call runs f and returns its error, or, if f panics because a DLL or one
// of its procedures is missing, an error that names it, of errdefs class
// NotImplemented. Any other panic goes on. A missing procedure found in a
// goroutine f starts is out of its reach: wrap that goroutine's work too.
func Call(what string, f func() error) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		e, _ := r.(error)
		// A procedure missing from a DLL that loaded is a DLLError; a
		// system DLL that does not load is LoadLibraryEx's bare error.
		var missing *windows.DLLError
		switch {
		case errors.As(e, &missing):
			err = fmt.Errorf("%s: this Windows lacks what it needs: %s: %w", what, missing.Msg, errdefs.ErrNotImplemented)
		case errors.Is(e, windows.ERROR_MOD_NOT_FOUND), errors.Is(e, windows.ERROR_PROC_NOT_FOUND):
			err = fmt.Errorf("%s: this Windows lacks a DLL it needs: %v: %w", what, e, errdefs.ErrNotImplemented)
		default:
			panic(r)
		}
	}()
	return f()
}
