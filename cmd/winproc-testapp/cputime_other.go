//go:build !unix && !windows

package main

import (
	"errors"
	"time"
)

func cpuTime() (time.Duration, error) {
	return 0, errors.New("CPU time is not available on this system")
}
