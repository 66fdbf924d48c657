package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients/toggl/toggltest"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
)

// syncOnce runs one incremental pass of source tg in a fresh process
// (app.Open) whose config gives token.
func syncOnce(t *testing.T, u string, f *toggltest.Server, token string) {
	t.Helper()
	ctx := context.Background()
	yaml := fmt.Sprintf("database_url: ${DATABASE_URL}\nsources:\n  - name: tg\n    kind: toggl\n    base_url: %s\n    workspace_id: \"%d\"\n    token: %s\n    overlap: 1h\n    rate_limit: {requests: 100, per: 1s}\n    resources: [time_entries]\n",
		f.URL(), f.WorkspaceID(), token)
	cfg, err := config.Parse("tg.yaml", []byte(yaml), func(k string) (string, bool) { return u, k == "DATABASE_URL" })
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.Open(ctx, cfg, u, "test", zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	p, err := a.Poller(ctx, "tg")
	if err != nil {
		t.Fatal(err)
	}
	release, err := p.TakeOwnership(ctx, "tg")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if _, err := p.Incremental(ctx, "tg"); err != nil {
		t.Fatal(err)
	}
}

// The source is given another person's token (issue 30, 4): the next
// process asks GET /me again, whatever a process learnt of the previous
// owner less than a day ago, and the entries it lists again are dated in
// the new owner's zone, though Toggl sends them byte for byte as before.
func TestTokenChangeAsksMeAgainAndRedatesEntries(t *testing.T) {
	t.Parallel()
	u := pgtest.URL(t)
	f := toggltest.New(toggltest.Options{Token: "token-of-ann", TimeZone: "Pacific/Auckland"})
	t.Cleanup(f.Close)
	// 20:00 UTC: the next day in Auckland, the same day in Los Angeles.
	start := time.Now().UTC().Add(-48 * time.Hour).Truncate(24 * time.Hour).Add(20 * time.Hour)
	stop := start.Add(30 * time.Minute)
	f.PutTimeEntry(toggltest.TimeEntry{ID: 1, UserID: toggltest.OwnerID, Start: start, Stop: &stop, Duration: 1800})
	db, err := pgxpool.New(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	spent := func() string {
		var d time.Time
		if err := db.QueryRow(context.Background(), `SELECT spent_date FROM time_entries WHERE source = 'tg' AND id = '1'`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d.Format(time.DateOnly)
	}
	me := func() int {
		n := 0
		for _, rq := range f.Requests() {
			if rq.Path == "/me" {
				n++
			}
		}
		return n
	}

	syncOnce(t, u, f, "token-of-ann")
	if got, want := spent(), start.AddDate(0, 0, 1).Format(time.DateOnly); got != want || me() != 1 {
		t.Fatalf("Ann's token: spent_date %s (want %s, Auckland), /me asked %d times", got, want, me())
	}

	f.SetOwner("token-of-bob", "America/Los_Angeles")
	syncOnce(t, u, f, "token-of-bob")
	if n := me(); n != 2 {
		t.Fatalf("Bob's token: /me asked %d times in all, want 2 (once per owner)", n)
	}
	if got, want := spent(), start.Format(time.DateOnly); got != want {
		t.Fatalf("Bob's token: spent_date %s, want %s (Los Angeles)", got, want)
	}
}
