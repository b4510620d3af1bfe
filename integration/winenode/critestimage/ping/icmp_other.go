//go:build !windows

package main

import (
	"errors"
	"time"
)

// The image's ping is a Windows program; off Windows its loop is tested
// with a fake echoer (main_test.go).
func icmpEcho(string, time.Duration) (time.Duration, error) { return 0, errors.ErrUnsupported }
