package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/schema"
	"github.com/tidemarkhq/tidemark/upsert"
)

// entryDecoder decodes the test events' payload ({id, description, at}) as
// a time entry record fetched at fetched, as a listing would.
type entryDecoder struct{}

func (entryDecoder) DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) ([]clients.Record, bool, error) {
	var p struct {
		ID          json.Number `json:"id"`
		Description string      `json:"description"`
		At          time.Time   `json:"at"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, false, err
	}
	return []clients.Record{entryRecord(p.ID.String(), p.Description, p.At, fetched, payload)}, true, nil
}

func entryRecord(id, notes string, version, fetched time.Time, raw []byte) clients.Record {
	return clients.Record{ID: id, Version: version, FetchedAt: fetched, Raw: raw,
		Row: schema.TimeEntries.Row(schema.Values{"spent_date": clients.DateOf(version), "hours": clients.Decimal("1"),
			"notes": notes, "user_id": "1", "project_id": "2", "billable": false})}
}

// Issue 23, item 10: a late webhook for an edit made in the same second as
// a newer one that a pass already fetched does not roll the row back: the
// event's record counts as fetched when Toggl made the event (created_at),
// not when it arrived, so the pass's later fetch wins the tie.
func TestApplyLateEventDoesNotWinTheTie(t *testing.T) {
	t.Parallel()
	pool, st, seal := withToggl(t)
	ctx := context.Background()
	// The pass fetched the second edit ("newer") of 09:00:00 at 09:00:02.
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	newer := entryRecord("5", "newer", at, at.Add(2*time.Second), []byte(`{"id":5,"description":"newer","at":"2026-03-02T09:00:00+00:00"}`))
	if _, err := upsert.Apply(ctx, pool, "tg", clients.TimeEntries, []clients.Record{newer}); err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	in := &Intake{Store: st, Seal: seal, MaxBody: 4096, Apply: true, Log: zerolog.New(&logs).Level(zerolog.DebugLevel),
		Sources: map[string]Source{"tg": {Dialect: Toggl{}, Resources: []clients.Resource{clients.TimeEntries}, Decoder: entryDecoder{}}}}
	// The first edit's event, made at 09:00:00, arrives now.
	ev := togglEvent("101", "older")
	req, _ := http.NewRequest(http.MethodPost, "/webhooks/tg", strings.NewReader(ev))
	req.SetPathValue("source", "tg")
	req.Header.Set(TogglSignatureHeader, TogglSign(togglSecret, []byte(ev)))
	w := httptest.NewRecorder()
	in.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("delivery answered %d", w.Code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "webhook record applied") {
		if time.Now().After(deadline) {
			t.Fatalf("the event's record was not applied: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	var notes string
	if err := pool.QueryRow(ctx, `SELECT notes FROM time_entries WHERE source = 'tg' AND id = '5'`).Scan(&notes); err != nil || notes != "newer" {
		t.Fatalf("notes %q, %v: the late event rolled the row back", notes, err)
	}
}

// panicky panics on its first event, as a decoder meeting a payload nobody
// foresaw would, then decodes as entryDecoder.
type panicky struct{ calls *atomic.Int32 }

func (p panicky) DecodeEvent(r clients.Resource, payload []byte, fetched time.Time) ([]clients.Record, bool, error) {
	if p.calls.Add(1) == 1 {
		var m map[string]int
		m["boom"]++ // a nil map: the kind of bug a recover must catch
	}
	return entryDecoder{}.DecodeEvent(r, payload, fetched)
}

// Issue 30, 9: a panic in the apply goroutine is recovered, logged with
// the source, counted, and the intake keeps serving and applying.
func TestApplyPanicIsRecoveredAndCounted(t *testing.T) {
	t.Parallel()
	pool, st, seal := withToggl(t)
	ctx := context.Background()
	var logs logtest.Buffer
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	in := &Intake{Store: st, Seal: seal, MaxBody: 4096, Apply: true, Log: zerolog.New(&logs).Level(zerolog.DebugLevel), Metrics: m,
		Sources: map[string]Source{"tg": {Dialect: Toggl{}, Resources: []clients.Resource{clients.TimeEntries}, Decoder: panicky{&atomic.Int32{}}}}}
	deliver := func(id, notes string) {
		ev := togglEvent(id, notes)
		req, _ := http.NewRequest(http.MethodPost, "/webhooks/tg", strings.NewReader(ev))
		req.SetPathValue("source", "tg")
		req.Header.Set(TogglSignatureHeader, TogglSign(togglSecret, []byte(ev)))
		w := httptest.NewRecorder()
		in.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("delivery %s answered %d", id, w.Code)
		}
	}
	waitLog := func(what string) {
		deadline := time.Now().Add(slowdown.Scale(30 * time.Second))
		for !strings.Contains(logs.String(), what) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the logs: %s", what, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	deliver("201", "first")
	waitLog("the apply panicked")
	if n := panicsOf(t, reg, "tg"); n != 1 {
		t.Fatalf("tidemark_webhook_apply_panics_total{source=tg} = %v, want 1", n)
	}
	if l := logs.String(); !strings.Contains(l, `"source":"tg"`) || !strings.Contains(l, "panic") {
		t.Fatalf("the panic's log line: %s", l)
	}
	deliver("202", "second")
	waitLog("webhook record applied")
	var notes string
	if err := pool.QueryRow(ctx, `SELECT notes FROM time_entries WHERE source = 'tg' AND id = '5'`).Scan(&notes); err != nil || notes != "second" {
		t.Fatalf("after the panic: notes %q, %v", notes, err)
	}
}

// panicsOf reads tidemark_webhook_apply_panics_total{source}.
func panicsOf(t *testing.T, reg *prometheus.Registry, source string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "tidemark_webhook_apply_panics_total" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "source" && l.GetValue() == source {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
