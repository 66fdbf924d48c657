package webhooks

import (
	"context"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
)

// The quota never lets an hour hold more triggered requests than the
// spare, however often webhooks ask.
func TestQuotaNeverSpendsMoreThanTheSpareInAnyHour(t *testing.T) {
	t.Parallel()
	for _, spare := range []int{1, 7, 25, 570} {
		q := NewQuota(spare, 2, map[clients.Resource]int{clients.TimeEntries: 2})
		var allowed []time.Time
		now := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
		for range 4 * 3600 { // a trigger every second for four hours
			if q.wait(context.Background(), now, []clients.Resource{clients.TimeEntries}) == 0 {
				allowed = append(allowed, now, now) // two requests a pass
			}
			now = now.Add(time.Second)
		}
		i := 0
		for j := range allowed {
			for allowed[j].Sub(allowed[i]) >= time.Hour {
				i++
			}
			if n := j - i + 1; n > spare {
				t.Fatalf("spare %d: %d requests within an hour", spare, n)
			}
		}
		if spare >= 2 && len(allowed) == 0 {
			t.Fatalf("spare %d: nothing allowed", spare)
		}
	}
}
