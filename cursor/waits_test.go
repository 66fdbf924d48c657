package cursor_test

import (
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
)

func TestWaits(t *testing.T) {
	ctx, pool, s := setup(t)
	until := time.Date(2026, 3, 1, 14, 0, 0, 0, time.UTC)
	if err := cursor.SetWait(ctx, pool, cursor.Wait{Source: "tg", Until: until, Reason: "quota"}); err != nil {
		t.Fatal(err)
	}
	if err := cursor.SetWait(ctx, pool, cursor.Wait{Source: "tg", Until: until.Add(time.Hour), Reason: "quota"}); err != nil {
		t.Fatal(err)
	}
	ws, err := s.Waits(ctx, "")
	if err != nil || len(ws) != 1 || !ws[0].Until.Equal(until.Add(time.Hour)) || ws[0].Reason != "quota" {
		t.Fatalf("waits %+v (%v)", ws, err)
	}
	if err := cursor.ClearWait(ctx, pool, "tg"); err != nil {
		t.Fatal(err)
	}
	if ws, err := s.Waits(ctx, "tg"); err != nil || len(ws) != 0 {
		t.Fatalf("after clear: %+v (%v)", ws, err)
	}
}
