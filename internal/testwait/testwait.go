// Package testwait waits, in tests, for a channel to close or not: that
// something happened soon, or did not happen for a while. It is a test
// harness (docs/architecture.md, Layering): nothing shipped imports it.
package testwait

import (
	"testing"
	"time"
)

// Soon bounds how long Within waits: long enough for a goroutine to run on
// a loaded machine and a Windows test binary under Wine, short enough that
// a failure shows quickly.
const Soon = 3 * time.Second

// Within fails the test unless ch closes within Soon.
func Within(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Soon):
		t.Fatalf("%s did not happen", what)
	}
}

// NotWithin fails the test if ch closes within d.
func NotWithin(t testing.TB, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s happened too early", what)
	case <-time.After(d):
	}
}
