package toggl

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// reportPage is a detailed search response (POST /reports/api/v3/
// workspace/{wid}/search/time_entries) of the shape Toggl documents and
// third-party clients record: a bare array of rows, each with the entry's
// user, project, task, billable, description, tag_ids, amounts, row_number
// and its time_entries [{id, seconds, start, stop, at, at_tz}]. Written for
// this test; the values are made up. The first row's start carries a +02:00
// offset (a user in Berlin, summer), the second +00:00 (no zone given), the
// third is a running timer (stop null).
const reportPage = `[
  {"user_id": 7001, "username": "ana@example.org", "project_id": 310, "task_id": null, "billable": true,
   "description": "sprint review", "tag_ids": [41, 42], "billable_amount_in_cents": 7500, "hourly_rate_in_cents": 5000,
   "currency": "EUR", "row_number": 1,
   "time_entries": [{"id": 880001, "seconds": 5400, "start": "2024-09-02T00:30:00+02:00", "stop": "2024-09-02T02:00:00+02:00",
     "at": "2024-09-02T08:25:48+00:00", "at_tz": "2024-09-02T10:25:48+02:00"}]},
  {"user_id": 7002, "username": "bo@example.org", "project_id": null, "task_id": 55, "billable": false,
   "description": "", "tag_ids": [], "billable_amount_in_cents": null, "hourly_rate_in_cents": null,
   "currency": "EUR", "row_number": 2,
   "time_entries": [{"id": 880002, "seconds": 100, "start": "2024-09-01T23:30:00+00:00", "stop": "2024-09-01T23:31:40+00:00",
     "at": "2024-09-02T09:00:00+00:00", "at_tz": "2024-09-02T09:00:00+00:00"}]},
  {"user_id": 7003, "username": "cy@example.org", "project_id": 310, "task_id": null, "billable": false,
   "description": "on call", "tag_ids": null, "billable_amount_in_cents": null, "hourly_rate_in_cents": null,
   "currency": "EUR", "row_number": 3,
   "time_entries": [{"id": 880003, "seconds": -1725260400, "start": "2024-09-02T07:00:00+00:00", "stop": null,
     "at": "2024-09-02T07:00:05+00:00", "at_tz": "2024-09-02T07:00:05+00:00"}]}
]`

func TestDecodeReportRows(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	raws, tagIDs, err := d.flattenRows(1, []byte(reportPage))
	if err != nil {
		t.Fatal(err)
	}
	if len(raws) != 3 || !reflect.DeepEqual(tagIDs, []int64{41, 42}) {
		t.Fatalf("%d entries, tag ids %v", len(raws), tagIDs)
	}
	for i, raw := range raws {
		if bytes.Contains(raw, []byte(`"row_number"`)) || bytes.Contains(raw, []byte(`"time_entries"`)) {
			t.Errorf("entry %d raw keeps the row's position or nesting: %s", i, raw)
		}
	}
	// A row's position moves when another comes or goes: the raw (and so
	// the content hash) must not.
	moved, _, err := d.flattenRows(1, bytes.Replace([]byte(reportPage), []byte(`"row_number": 2`), []byte(`"row_number": 9`), 1))
	if err != nil || !bytes.Equal(moved[1], raws[1]) {
		t.Fatalf("raw changes with row_number: %s vs %s (%v)", moved[1], raws[1], err)
	}
	owner, _ := time.LoadLocation("America/New_York")
	clock := time.Date(2024, 9, 2, 9, 0, 0, 0, time.UTC)
	fetched := clock.Add(time.Second)
	recs, err := d.decodeReport(1, raws, fetched, clock, owner, map[int64]string{41: "client-a", 42: "urgent"})
	if err != nil {
		t.Fatal(err)
	}
	start0 := time.Date(2024, 9, 1, 22, 30, 0, 0, time.UTC)
	start1 := time.Date(2024, 9, 1, 23, 30, 0, 0, time.UTC)
	start2 := time.Date(2024, 9, 2, 7, 0, 0, 0, time.UTC)
	te := schema.TimeEntries
	want := []struct {
		id      string
		version time.Time
		row     schema.Values
	}{
		{"880001", time.Date(2024, 9, 2, 8, 25, 48, 0, time.UTC), schema.Values{
			// 00:30 in the user's +02:00 is 2 September, though 1 September in UTC.
			"spent_date": clients.Date{Year: 2024, Month: 9, Day: 2}, "hours": clients.Decimal("1.5"), "notes": "sprint review",
			"user_id": "7001", "project_id": "310", "billable": true, "started_at": start0, "ended_at": start0.Add(90 * time.Minute),
			"time_zone": "+02:00", "tags": json.RawMessage(`["client-a","urgent"]`)}},
		{"880002", time.Date(2024, 9, 2, 9, 0, 0, 0, time.UTC), schema.Values{
			// No offset given: the token owner's zone (New York) dates it.
			"spent_date": clients.Date{Year: 2024, Month: 9, Day: 1}, "hours": clients.Decimal("0.027778"), "notes": "",
			"user_id": "7002", "project_id": "", "task_id": "55", "started_at": start1, "ended_at": start1.Add(100 * time.Second),
			"time_zone": "America/New_York", "tags": json.RawMessage(`[]`)}},
		{"880003", time.Date(2024, 9, 2, 7, 0, 5, 0, time.UTC), schema.Values{
			"spent_date": clients.Date{Year: 2024, Month: 9, Day: 2}, "hours": clients.Decimal("2"), "notes": "on call",
			"user_id": "7003", "project_id": "310", "is_running": true, "started_at": start2,
			"time_zone": "America/New_York"}},
	}
	for i, w := range want {
		r := recs[i]
		if r.ID != w.id || !r.Version.Equal(w.version) || r.DeletedAt != nil || !r.FetchedAt.Equal(fetched) {
			t.Errorf("entry %d: id %s version %v deleted %v", i, r.ID, r.Version, r.DeletedAt)
		}
		row := te.Row(w.row)
		// Columns Toggl has no value for.
		row[teLocked], row[teClosed], row[teBilled] = false, false, false
		if w.row["is_running"] == nil {
			row[teRunning] = false
		}
		if w.row["billable"] == nil {
			row[teBillable] = false
		}
		if !reflect.DeepEqual(r.Row, row) {
			t.Errorf("entry %d row\n got %#v\nwant %#v", i, r.Row, row)
		}
	}
	// A tag id the workspace's tags do not name fails the page, naming it.
	if _, err := d.decodeReport(1, raws, fetched, clock, owner, map[int64]string{41: "client-a"}); err == nil {
		t.Error("unknown tag id accepted")
	}
}

func TestDecodeReportRejectsBadShapes(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	for _, body := range []string{
		`{"data": []}`,
		`null`,
		`[{"user_id": 1, "row_number": 1}]`,
		`[{"user_id": 1, "time_entries": [17]}]`,
		`[{"user_id": 1, "tag_ids": ["x"], "time_entries": [{"id": 1}]}]`,
	} {
		if _, _, err := d.flattenRows(1, []byte(body)); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
	// An entry without at fails as a /me entry does.
	raws, _, err := d.flattenRows(1, []byte(`[{"user_id": 1, "time_entries": [{"id": 1, "seconds": 5, "start": "2024-09-02T07:00:00Z", "stop": "2024-09-02T07:00:05Z"}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.decodeReport(1, raws, time.Now(), time.Now(), time.UTC, nil); err == nil {
		t.Error("entry without at accepted")
	}
}

func TestReportsBaseFromTheAPIBase(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.track.toggl.com/api/v9":  "https://api.track.toggl.com/reports/api/v3",
		"https://api.track.toggl.com/api/v9/": "https://api.track.toggl.com/reports/api/v3",
		"http://127.0.0.1:4000/api/v9":        "http://127.0.0.1:4000/reports/api/v3",
		"https://proxy.example/toggl":         "https://proxy.example/toggl/reports/api/v3",
	} {
		if got := reportsBase(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
