package poller

import (
	"fmt"
	"testing"
	"time"
)

// Scheduled passes of many sources start spread over the splay, each source
// at the same offset every tick.
func TestSplaySpreadsSources(t *testing.T) {
	const n = 1000
	limit := 6 * time.Second // "* * * * *": a tenth of a minute
	buckets := make([]int, 6)
	for i := range n {
		src := fmt.Sprintf("src%05d", i)
		s := splayOf(src, limit)
		if s < 0 || s >= limit {
			t.Fatalf("splay of %s = %s, want within [0, %s)", src, s, limit)
		}
		if s != splayOf(src, limit) {
			t.Fatalf("splay of %s is not stable", src)
		}
		buckets[s/time.Second]++
	}
	for i, b := range buckets {
		if b < n/6/2 {
			t.Errorf("second %d of the splay holds %d of %d sources: not spread (%v)", i, b, n, buckets)
		}
	}
	if s := splayOf("acme", time.Hour); s >= MaxSplay {
		t.Errorf("splay %s over MaxSplay %s", s, MaxSplay)
	}
	if s := splayOf("acme", 0); s != 0 {
		t.Errorf("splay with no room = %s, want 0", s)
	}
}
