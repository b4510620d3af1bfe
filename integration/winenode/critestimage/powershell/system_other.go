//go:build !windows

package main

import "errors"

// The image's programs are Windows programs; off Windows the shell's
// logic is tested with fakes of these (script_test.go).
func processes() ([]process, error) { return nil, errors.ErrUnsupported }

func external([]string) (int, error) { return 0, errors.ErrUnsupported }
