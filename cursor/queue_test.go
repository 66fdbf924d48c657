package cursor_test

import (
	"errors"
	"testing"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
)

func TestQueueBackfill(t *testing.T) {
	ctx, _, s := setup(t)
	p := cursor.BackfillParams{Source: "acme", Resource: "time_entries",
		From: clients.Date{Year: 2026, Month: 1, Day: 1}, To: clients.Date{Year: 2026, Month: 1, Day: 10}, WindowDays: 5}
	q, err := s.QueueBackfill(ctx, p)
	if err != nil || q.Status != cursor.BackfillQueued || q.WindowsTotal != 2 {
		t.Fatalf("queued %+v (%v)", q, err)
	}
	list, err := s.QueuedBackfills(ctx, "acme")
	if err != nil || len(list) != 1 || list[0].ID != q.ID {
		t.Fatalf("queued list %+v (%v)", list, err)
	}
	// The owner starts it: the same row, now running; queueing it again
	// leaves it running.
	b, err := s.StartBackfill(ctx, p)
	if err != nil || b.ID != q.ID || b.Status != cursor.StatusRunning {
		t.Fatalf("started %+v (%v)", b, err)
	}
	if again, err := s.QueueBackfill(ctx, p); err != nil || again.ID != q.ID || again.Status != cursor.StatusRunning {
		t.Fatalf("queued while running: %+v (%v)", again, err)
	}
	if list, _ := s.QueuedBackfills(ctx, ""); len(list) != 0 {
		t.Fatalf("still queued: %+v", list)
	}
	got, err := s.Backfill(ctx, q.ID)
	if err != nil || got.Status != cursor.StatusRunning {
		t.Fatalf("by id: %+v (%v)", got, err)
	}
	if _, err := s.Backfill(ctx, 9999); !errors.Is(err, cursor.ErrNotFound) {
		t.Fatalf("missing id: %v", err)
	}
}
