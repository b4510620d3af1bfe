package testwait

import (
	"testing"
	"time"
)

// recorder is a testing.TB that records a Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
}

func TestWithinAndNotWithin(t *testing.T) {
	closed := make(chan struct{})
	close(closed)
	open := make(chan struct{})
	tests := []struct {
		name   string
		wait   func(testing.TB)
		failed string
	}{
		{"within a closed channel", func(tb testing.TB) { Within(tb, closed, "x") }, ""},
		{"not within an open channel", func(tb testing.TB) { NotWithin(tb, open, time.Millisecond, "x") }, ""},
		{"not within a closed channel", func(tb testing.TB) { NotWithin(tb, closed, time.Minute, "x") }, "%s happened too early"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &recorder{TB: t}
			tc.wait(r)
			if r.failed != tc.failed {
				t.Errorf("failure %q; want %q", r.failed, tc.failed)
			}
		})
	}
}
