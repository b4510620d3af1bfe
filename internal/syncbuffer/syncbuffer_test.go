package syncbuffer

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once: every byte written is there at the end,
// and each Write lands whole.
func TestConcurrentWritesKeepEveryByte(t *testing.T) {
	var b Buffer
	const writers, writes = 8, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				_ = b.String()
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := strings.Repeat(string(rune('a'+w)), 9) + "\n"
			for range writes {
				if n, err := b.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v", n, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != writers*writes {
		t.Fatalf("%d lines, want %d", len(lines), writers*writes)
	}
	for _, l := range lines {
		if len(l) != 9 || strings.Count(l, l[:1]) != 9 {
			t.Fatalf("torn line %q", l)
		}
	}
}
