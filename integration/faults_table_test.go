//go:build linux

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// callDeadline is the deadline of every call TestFaults makes to the node
// while it counts: a kubelet's is of that order.
const callDeadline = 20 * time.Second

// faultRow is one line of TestFaults's table: how many pods went through
// the fault, how many calls were made and how many returned before their
// deadline, how many pods were removed while the fault held, and what of
// the pods was left at the end.
type faultRow struct {
	fault      string
	pods       int
	calls      int
	inDeadline int
	removed    int
	left       []string
}

// call runs one call with its deadline and counts it: in deadline if it
// returned before the deadline, whether it failed or not.
func (r *faultRow) call(ctx context.Context, do func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, callDeadline)
	defer cancel()
	start := time.Now()
	err := do(ctx)
	r.calls++
	if time.Since(start) < callDeadline {
		r.inDeadline++
	}
	return err
}

// faultTable collects TestFaults's rows.
type faultTable struct {
	mu   sync.Mutex
	rows []faultRow
}

func (tb *faultTable) add(r faultRow) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.rows = append(tb.rows, r)
}

// log prints the table as markdown.
func (tb *faultTable) log(t *testing.T) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b strings.Builder
	b.WriteString("\n| fault | pods | calls | in deadline | removed | left |\n|---|---|---|---|---|---|\n")
	for _, r := range tb.rows {
		left := "nothing"
		if len(r.left) > 0 {
			left = fmt.Sprintf("%d: %s", len(r.left), strings.Join(r.left, "; "))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %s |\n", r.fault, r.pods, r.calls, r.inDeadline, r.removed, left)
	}
	t.Log(b.String())
}
