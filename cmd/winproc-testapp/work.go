package main

import (
	"sync/atomic"
	"time"
)

// sink keeps the compiler from dropping spin's arithmetic.
var sink atomic.Uint64

// spin burns CPU on the calling goroutine until d has passed or stopped
// reports true; it checks both every few thousand rounds.
func spin(d time.Duration, stopped func() bool) {
	deadline := time.Now().Add(d)
	x := uint64(1)
	for time.Now().Before(deadline) && !stopped() {
		for range 4096 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}

// maxAllocMiB bounds one allocation request.
const maxAllocMiB = 1 << 14

const mib = 1 << 20

// allocMiB allocates n MiB and writes to every page of it, so the memory is
// committed and resident, not just reserved.
func allocMiB(n int) [][]byte {
	mem := make([][]byte, n)
	for i := range mem {
		b := make([]byte, mib)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		mem[i] = b
	}
	return mem
}
