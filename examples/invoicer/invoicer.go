// Package invoicer is an example consumer of tidemark's change feed: it
// turns approved time into invoice drafts in an accounting API exactly once
// per client and ISO week, although the feed delivers at least once and the
// API is outside our database.
//
// How: an outcome store in Postgres keyed by the logical operation
// (client + ISO week) records in-progress / succeeded / failed / review,
// the external invoice id, a fingerprint of the request and the request
// itself. The key goes as Idempotency-Key on every attempt, so a retry after
// a crash between the create and the record gets the invoice the first
// attempt created. Each step commits on its own (a checkpoint) before the
// next one starts, and the external id is stored as soon as it arrives. A
// request that changed under a live key (more time approved for a week
// already invoiced) goes to a person (status review) instead of
// overwriting.
//
// The outcome store's rule: an attempt whose outcome is unknown (a timeout,
// a dropped connection, a 5xx, 409 "this key is being processed", a crash)
// stays in_progress and is resolved by asking again under the same key;
// only an answer that proves the effect did not happen (another 4xx) is
// final. Before a changed request goes to review, the stored one is re-sent
// under its key, so the review names the invoice that exists.
package invoicer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/events"
)

// Schema creates the outcome store (the example owns its table).
const Schema = `CREATE TABLE IF NOT EXISTS invoicer_outcomes (
    key         text PRIMARY KEY,            -- the logical operation: <source>/<client>/<ISO week>
    status      text NOT NULL CHECK (status IN ('in_progress', 'succeeded', 'failed', 'review')),
    external_id text,                        -- the accounting API's invoice id, stored as soon as known
    fingerprint bytea NOT NULL,              -- SHA-256 of the request
    request     jsonb NOT NULL,              -- the request, re-sent as is on every attempt
    note        text,                        -- why a person must look (review, failed)
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,        -- TTL: the API keeps idempotency keys this long
    changes     jsonb                        -- review: the entries changed since the invoice (from the history)
);
ALTER TABLE invoicer_outcomes ADD COLUMN IF NOT EXISTS changes jsonb`

// KeyTTL is how long the accounting API honours an idempotency key; an
// outcome is kept as long.
const KeyTTL = 30 * 24 * time.Hour

// RequestTimeout bounds one call to the accounting API when HTTP is nil:
// a create held open is an unknown outcome, asked again later under its
// key, not a consumer held for as long as the API likes.
const RequestTimeout = 10 * time.Second

// Invoicer is the consumer.
type Invoicer struct {
	Pool *pgxpool.Pool
	URL  string // the accounting API
	// HTTP is the client of the accounting API (nil: one with
	// RequestTimeout).
	HTTP *http.Client
	// AfterCreate, when set, runs after the API answered and before the
	// answer is recorded: tests end the process there.
	AfterCreate func() error
}

// Migrate creates the outcome store.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, Schema)
	return err
}

// request is what the API receives for one client-week.
type request struct {
	ClientID string   `json:"client_id"`
	Week     string   `json:"week"`
	Hours    string   `json:"hours"`
	Entries  []string `json:"entries"`
}

// ErrPermanent marks an API answer that retrying will not fix.
var ErrPermanent = errors.New("refused by the accounting API")

// Handle is the events.Handler: for a time entry event, it makes sure the
// entry's client-week has its one invoice.
func (v *Invoicer) Handle(ctx context.Context, tx pgx.Tx, ev events.Event) error {
	if ev.Resource != clients.TimeEntries {
		return nil
	}
	var client *string
	var day time.Time
	err := tx.QueryRow(ctx, `SELECT client_id, spent_date FROM time_entries WHERE source = $1 AND id = $2`, ev.Source, ev.RecordID).Scan(&client, &day)
	if errors.Is(err, pgx.ErrNoRows) || client == nil {
		return nil
	}
	if err != nil {
		return err
	}
	year, week := day.ISOWeek()
	wk := fmt.Sprintf("%04d-W%02d", year, week)
	req, err := v.approved(ctx, tx, ev.Source, *client, day)
	if err != nil || req == nil {
		return err
	}
	req.Week = wk
	return v.invoice(ctx, ev.Source+"/"+*client+"/"+wk, *req, weekOf(ev.Source, *client, day))
}

// week is the approved time one request covers.
type week struct {
	source, client string
	monday, sunday time.Time
}

func weekOf(source, client string, day time.Time) week {
	monday := day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	return week{source, client, monday, monday.AddDate(0, 0, 6)}
}

// approved reads the client's approved, live time of the ISO week of day
// from the mirror; nil when there is none.
func (v *Invoicer) approved(ctx context.Context, tx pgx.Tx, source, client string, day time.Time) (*request, error) {
	monday := day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
	r := &request{ClientID: client}
	err := tx.QueryRow(ctx, `SELECT coalesce(sum(hours), 0)::text, coalesce(array_agg(id ORDER BY id), '{}')
FROM time_entries WHERE source = $1 AND client_id = $2 AND spent_date BETWEEN $3 AND $4 AND is_closed AND deleted_at IS NULL`,
		source, client, monday, monday.AddDate(0, 0, 6)).Scan(&r.Hours, &r.Entries)
	if err != nil || len(r.Entries) == 0 {
		return nil, err
	}
	return r, nil
}

// invoice runs the operation key once: checkpoint, create, record.
func (v *Invoicer) invoice(ctx context.Context, key string, req request, wk week) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	fp := sha256.Sum256(body)
	// Step 1, committed before any call: the key is claimed with its
	// request. An existing outcome decides instead.
	var status string
	var stored, storedReq []byte
	var ext *string
	err = v.Pool.QueryRow(ctx, `INSERT INTO invoicer_outcomes (key, status, fingerprint, request, expires_at)
VALUES ($1, 'in_progress', $2, $3, now() + $4::interval)
ON CONFLICT (key) DO UPDATE SET updated_at = invoicer_outcomes.updated_at
RETURNING status, fingerprint, request, external_id`, key, fp[:], body, KeyTTL).Scan(&status, &stored, &storedReq, &ext)
	if err != nil {
		return fmt.Errorf("claim %s: %w", key, err)
	}
	if status == "in_progress" {
		// Step 2: the call, with the key, re-sending the stored request;
		// after a crash too, whatever the request has become since.
		if status, ext, err = v.resolve(ctx, key, storedReq); err != nil {
			return err // retried with back-off; the key stays in progress
		}
	}
	if !bytes.Equal(stored, fp[:]) && status != "review" {
		// The request changed under a live key: a person decides; never a
		// second invoice, never an overwrite. The note says what exists.
		what := "no invoice was created (the accounting API refused the first request)"
		if ext != nil {
			what = "invoice " + *ext + " exists for the first request"
		}
		_, err := v.Pool.Exec(ctx, `UPDATE invoicer_outcomes SET status = 'review', updated_at = now(),
    note = 'the approved time changed after the invoice request was made (' || $2 || '): ' || $3 WHERE key = $1 AND status <> 'review'`, key, what, string(body))
		if err != nil {
			return err
		}
		return v.noteChanges(ctx, key, wk)
	}
	return nil // done (or a person's) already: a resent or replayed event
}

// resolve sends the stored request of key and records what the answer
// proves: succeeded with the invoice's id, or failed when the API refused
// it. An unknown outcome is an error, and the key stays in progress.
func (v *Invoicer) resolve(ctx context.Context, key string, storedReq []byte) (status string, ext *string, err error) {
	inv, err := v.post(ctx, key, storedReq)
	if errors.Is(err, ErrPermanent) {
		_, uerr := v.Pool.Exec(ctx, `UPDATE invoicer_outcomes SET status = 'failed', note = $2, updated_at = now() WHERE key = $1`, key, err.Error())
		return "failed", nil, uerr
	}
	if err != nil {
		return "", nil, err
	}
	if v.AfterCreate != nil {
		if err := v.AfterCreate(); err != nil {
			return "", nil, err
		}
	}
	// Step 3: the external id, as soon as we have it.
	_, err = v.Pool.Exec(ctx, `UPDATE invoicer_outcomes SET status = 'succeeded', external_id = $2, updated_at = now() WHERE key = $1`, key, inv.ID)
	return "succeeded", &inv.ID, err
}

func (v *Invoicer) post(ctx context.Context, key string, body []byte) (Invoice, error) {
	var inv Invoice
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, v.URL+"/invoices", bytes.NewReader(body))
	if err != nil {
		return inv, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Idempotency-Key", key)
	hc := v.HTTP
	if hc == nil {
		hc = defaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return inv, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated:
		if err := json.Unmarshal(b, &inv); err != nil || inv.ID == "" {
			return inv, fmt.Errorf("accounting API: %s without an invoice id: %.200s", resp.Status, b)
		}
		return inv, nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusTooManyRequests,
		// 409: a request under this key is still being processed (Stripe,
		// the IETF Idempotency-Key draft): ask again later.
		resp.StatusCode == http.StatusConflict, resp.StatusCode == http.StatusRequestTimeout,
		// A redirect is not followed (it would re-send the request
		// elsewhere) and proves nothing.
		resp.StatusCode >= 300 && resp.StatusCode < 400:
		return inv, fmt.Errorf("accounting API: %s (the outcome is not known yet)", resp.Status)
	default:
		return inv, fmt.Errorf("%w: %s: %s", ErrPermanent, resp.Status, bytes.TrimSpace(b))
	}
}

var defaultClient = &http.Client{
	Timeout: RequestTimeout,
	// A redirect would re-send the request elsewhere: an error instead.
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// Purge deletes outcomes past their TTL.
func Purge(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	tag, err := pool.Exec(ctx, `DELETE FROM invoicer_outcomes WHERE expires_at < now()`)
	return tag.RowsAffected(), err
}

// noteChanges records, on an outcome in review, which approved entries of
// its week changed since the invoice request was made, and by how many
// hours: the week as the mirror knew it then (time_entries_known_at, the
// history of tidemark's `history:`) against the mirror now. Without history
// the review has only its note.
func (v *Invoicer) noteChanges(ctx context.Context, key string, wk week) error {
	var have bool
	if err := v.Pool.QueryRow(ctx, `SELECT to_regclass('time_entries_history') IS NOT NULL`).Scan(&have); err != nil || !have {
		return err
	}
	_, err := v.Pool.Exec(ctx, changesSQL, key, wk.source, wk.client, wk.monday, wk.sunday)
	return err
}

// changesSQL: the approved entries of the week at the outcome's creation
// (recorded time) and now, and those whose hours differ; nothing when the
// history was not on without a break since then (it would not know).
const changesSQL = `WITH o AS (SELECT created_at FROM invoicer_outcomes o WHERE key = $1
  AND EXISTS (SELECT 1 FROM history_sources h WHERE h.source = $2 AND h.resource = 'time_entries' AND h.since <= o.created_at)),
was AS (SELECT id, hours FROM time_entries_known_at($2, (SELECT created_at FROM o))
  WHERE client_id = $3 AND spent_date BETWEEN $4 AND $5 AND is_closed),
now AS (SELECT id, hours FROM time_entries
  WHERE source = $2 AND client_id = $3 AND spent_date BETWEEN $4 AND $5 AND is_closed AND deleted_at IS NULL),
d AS (SELECT id, was.hours AS invoiced, now.hours AS now, coalesce(now.hours, 0) - coalesce(was.hours, 0) AS change
  FROM was FULL JOIN now USING (id) WHERE was.hours IS DISTINCT FROM now.hours)
UPDATE invoicer_outcomes SET changes = (SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.id), '[]') FROM d)
WHERE key = $1 AND EXISTS (SELECT 1 FROM o)`
