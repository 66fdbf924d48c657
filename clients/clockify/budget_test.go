package clockify

import (
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider"
)

func TestFeedRequests(t *testing.T) {
	cases := []struct {
		span             time.Duration
		created, deleted int
	}{
		{time.Minute, 2, 1},
		{15 * time.Minute, 2, 16},  // every 5 min + 10 min overlap: deletions by the minute
		{70 * time.Minute, 2, 1},   // over DeletionSpan: one deleted request per window
		{8 * 24 * time.Hour, 4, 2}, // two feed windows
		{24*time.Hour + time.Hour, 2, 1},
	}
	for _, tc := range cases {
		c, d := feedRequests(tc.span, DefaultFeedWindow, DefaultDeletionWindow, DefaultDeletionSpan)
		if c != tc.created || d != tc.deleted {
			t.Errorf("span %s: %d created/updated, %d deleted; want %d, %d", tc.span, c, d, tc.created, tc.deleted)
		}
	}
	got := PassCost(clients.TimeEntries, provider.PassShape{Span: 15 * time.Minute}, provider.Settings{})
	if got.Requests != 19 {
		t.Fatalf("time entries over 15 min: %+v", got)
	}
}
