package toggl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

const goodEntry = `{"id":1,"workspace_id":9,"project_id":3,"task_id":null,"user_id":2,"billable":true,"description":"n","start":"2026-01-02T23:30:00-02:00","stop":"2026-01-03T01:00:00-02:00","duration":5400,"tags":[],"at":"2026-01-03T03:00:00+00:00","server_deleted_at":null}`

func list(recs ...string) string { return "[" + strings.Join(recs, ",") + "]" }

// decodeCases feed both the table test and the fuzz corpus.
var decodeCases = []struct {
	name, res, body string
	field, what     string // "" when the page is good
}{
	{"good entry", "time_entries", list(goodEntry), "", ""},
	{"good deleted entry", "time_entries", list(strings.Replace(goodEntry, `"server_deleted_at":null`, `"server_deleted_at":"2026-01-04T00:00:00Z"`, 1)), "", ""},
	{"good running entry", "time_entries", list(strings.Replace(goodEntry, `"duration":5400`, `"duration":-1767403800`, 1)), "", ""},
	{"good project", "projects", list(`{"id":9,"workspace_id":1,"client_id":null,"name":"P","active":true,"billable":null,"at":"2026-01-02T10:00:00+00:00"}`), "", ""},
	{"good client", "clients", list(`{"id":9,"wid":1,"name":"C","archived":false,"at":"2026-01-02T10:00:00+00:00"}`), "", ""},
	{"good user", "users", list(`{"id":9,"email":"a@b","fullname":"Ada B","inactive":false,"at":"2026-01-02T10:00:00+00:00"}`), "", ""},
	{"good task", "tasks", list(`{"id":9,"project_id":1,"name":"T","active":true,"at":"2026-01-02T10:00:00+00:00"}`), "", ""},
	{"empty page", "users", `[]`, "", ""},
	{"html", "time_entries", "<html><body>Oops</body></html>", "(page)", "not JSON"},
	{"truncated", "time_entries", list(goodEntry)[:80], "(page)", "not JSON"},
	{"object page", "time_entries", `{"data":[]}`, "(page)", "want an array of records, got object"},
	{"null page", "time_entries", `null`, "(page)", "want an array of records, got null"},
	{"record not object", "time_entries", list(`5`), "time_entries[0]", "want an object, got number"},
	{"id missing", "time_entries", list(strings.Replace(goodEntry, `"id":1,`, ``, 1)), "time_entries[0].id", "missing"},
	{"id not integer", "users", list(`{"id":1.5,"at":"2026-01-02T10:00:00Z"}`), "users[0].id", "want an integer id"},
	{"id bool", "users", list(`{"id":true,"at":"2026-01-02T10:00:00Z"}`), "users[0].id", "want string, got bool"},
	{"at missing", "time_entries", list(strings.Replace(goodEntry, `"at":"2026-01-03T03:00:00+00:00",`, ``, 1)), "time_entries[0].at", "missing"},
	{"at null", "tasks", list(`{"id":1,"at":null}`), "tasks[0].at", "missing"},
	{"at not RFC3339", "tasks", list(`{"id":1,"at":"yesterday"}`), "tasks[0].at", "want RFC 3339"},
	{"at number", "tasks", list(`{"id":1,"at":5}`), "tasks[0].at", "want string, got number"},
	{"server_deleted_at bad", "clients", list(`{"id":1,"at":"2026-01-02T10:00:00Z","server_deleted_at":"soon"}`), "clients[0].server_deleted_at", "want RFC 3339"},
	{"start missing", "time_entries", list(strings.Replace(goodEntry, `"start":"2026-01-02T23:30:00-02:00",`, ``, 1)), "time_entries[0].start", "missing"},
	{"duration missing", "time_entries", list(strings.Replace(goodEntry, `"duration":5400,`, ``, 1)), "time_entries[0].duration", "missing"},
	{"duration fractional", "time_entries", list(strings.Replace(goodEntry, `"duration":5400`, `"duration":1.5`, 1)), "time_entries[0].duration", "want whole seconds"},
	{"user_id missing", "time_entries", list(strings.Replace(goodEntry, `"user_id":2,`, ``, 1)), "time_entries[0].user_id", "missing"},
	{"project_id float", "time_entries", list(strings.Replace(goodEntry, `"project_id":3`, `"project_id":3.5`, 1)), "time_entries[0].project_id", "want an integer id"},
	{"billable string", "time_entries", list(strings.Replace(goodEntry, `"billable":true`, `"billable":"yes"`, 1)), "time_entries[0].billable", "want boolean, got string"},
	{"description number", "time_entries", list(strings.Replace(goodEntry, `"description":"n"`, `"description":3`, 1)), "time_entries[0].description", "want string, got number"},
	{"second record bad", "time_entries", list(goodEntry, `{"id":2}`), "time_entries[1].at", "missing"},
}

func TestDecodePageTable(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := d.decodePage(clients.Resource(tc.res), 4, []byte(tc.body), time.Now(), time.Now())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				for _, r := range recs {
					if r.ID == "" || r.Version.IsZero() || r.Raw == nil || r.Version.Location() != time.UTC {
						t.Errorf("record %+v", r)
					}
				}
				return
			}
			sourcetest.WantDecodeError(t, err, "acme", tc.res, 4, tc.field, tc.what)
		})
	}
}

func TestDecodeEntryFields(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	recs, err := d.decodePage(clients.TimeEntries, 1, []byte(list(goodEntry)), time.Unix(5, 0), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	te := schema.TimeEntries
	// start 23:30 at -02:00 is 01:30 UTC on the 3rd: spent_date is the UTC day.
	want := te.Row(schema.Values{
		"spent_date": clients.Date{Year: 2026, Month: 1, Day: 3}, "hours": clients.Decimal("1.5"), "notes": "n",
		"user_id": "2", "project_id": "3", "billable": true,
		"started_at": time.Date(2026, 1, 3, 1, 30, 0, 0, time.UTC), "ended_at": time.Date(2026, 1, 3, 3, 0, 0, 0, time.UTC),
		"time_zone": "UTC", "tags": json.RawMessage(`[]`),
	})
	if r.ID != "1" || !r.Version.Equal(time.Date(2026, 1, 3, 3, 0, 0, 0, time.UTC)) || !r.FetchedAt.Equal(time.Unix(5, 0)) ||
		string(r.Raw) != goodEntry || r.DeletedAt != nil || !reflect.DeepEqual(r.Row, want) {
		t.Fatalf("record %+v\nrow  %#v\nwant %#v", r, r.Row, want)
	}

	// A running timer: hours from start to the source's clock.
	start := time.Date(2026, 1, 3, 1, 30, 0, 0, time.UTC)
	running := strings.Replace(goodEntry, `"duration":5400`, fmt.Sprintf(`"duration":%d`, -start.Unix()), 1)
	recs, err = d.decodePage(clients.TimeEntries, 1, []byte(list(running)), time.Now(), start.Add(45*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; !te.Bool(r, "is_running") || te.Decimal(r, "hours") != "0.75" {
		t.Fatalf("running entry %#v", r.Row)
	}

	// A deletion: a tombstone whose version is the later of at and
	// server_deleted_at.
	deleted := strings.Replace(goodEntry, `"server_deleted_at":null`, `"server_deleted_at":"2026-01-04T00:00:00+01:00"`, 1)
	recs, err = d.decodePage(clients.TimeEntries, 1, []byte(list(deleted)), time.Now(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 3, 23, 0, 0, 0, time.UTC)
	if r := recs[0]; r.DeletedAt == nil || !r.DeletedAt.Equal(at) || !r.Version.Equal(at) || r.Row == nil {
		t.Fatalf("deleted entry %+v", r)
	}
}

func TestHours(t *testing.T) {
	t.Parallel()
	for secs, want := range map[int64]clients.Decimal{
		0: "0", 1: "0.000278", 2: "0.000556", 100: "0.027778", 1800: "0.5", 3600: "1", 5400: "1.5",
		3599: "0.999722", 86399: "23.999722", 360000: "100", 7 * 3600 / 4: "1.75", 9: "0.0025", -5400: "-1.5",
	} {
		if got := Hours(secs); got != want {
			t.Errorf("Hours(%d) = %s, want %s", secs, got, want)
		}
	}
}

func FuzzDecodePage(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.res, []byte(tc.body))
	}
	d := newDecoder("acme", nil)
	clock := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, res string, body []byte) {
		recs, err := d.decodePage(clients.Resource(res), 1, body, clock, clock)
		if err != nil {
			if _, ok := schema.Lookup(clients.Resource(res)); ok && len(err.Error()) > 1000 {
				t.Fatalf("error too long: %d", len(err.Error()))
			}
			return
		}
		for _, r := range recs {
			if r.ID == "" || r.Version.IsZero() || len(r.Raw) == 0 || r.Version.Location() != time.UTC {
				t.Fatalf("incomplete record %+v", r)
			}
			if r.Row != nil && res == string(clients.TimeEntries) {
				if h := schema.TimeEntries.Decimal(r, "hours"); h == "" || strings.HasPrefix(string(h), "-") {
					t.Fatalf("hours %q", h)
				}
			}
		}
	})
}

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
		row[schema.TE.Locked], row[schema.TE.Closed], row[schema.TE.Billed] = false, false, false
		if w.row["is_running"] == nil {
			row[schema.TE.Running] = false
		}
		if w.row["billable"] == nil {
			row[schema.TE.Billable] = false
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

// Fixtures of the shapes Toggl serves, written for these tests after the
// documented and recorded bodies (see ../../../shared/realworld/SOURCES.md
// for what each real shape exercises); none is a copy of a recorded body.

// workspaceUsersPage is GET /workspaces/{wid}/users as documented: email,
// fullname, id, inactive, is_active, is_admin, role, and no `at`.
const workspaceUsersPage = `[
  {"id": 5123001, "email": "ana@example.org", "fullname": "Ana María Ortiz", "inactive": false, "is_active": true, "is_admin": true, "role": "admin"},
  {"id": 5123002, "email": "bo@example.org", "fullname": "Bo", "inactive": true, "is_active": false, "is_admin": false, "role": "user"}
]`

// Users carry no version stamp: each gets the listing's clock (its Date
// header), and the write compares them by content hash.
func TestDecodeWorkspaceUsersWithoutAt(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	clock := time.Date(2024, 12, 15, 23, 18, 30, 0, time.FixedZone("", 3600))
	fetched := time.Date(2024, 12, 15, 22, 18, 31, 0, time.UTC)
	recs, err := d.decodePage(clients.Users, 1, []byte(workspaceUsersPage), fetched, clock)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	us := schema.Users
	want := []schema.Values{
		{"first_name": "Ana", "last_name": "María Ortiz", "email": "ana@example.org", "is_active": true},
		{"first_name": "Bo", "email": "bo@example.org", "is_active": false},
	}
	for i, r := range recs {
		if !r.Version.Equal(clock) || r.Version.Location() != time.UTC || r.DeletedAt != nil || !r.FetchedAt.Equal(fetched) {
			t.Errorf("user %d: version %v (want the listing's clock %v in UTC), deleted %v", i, r.Version, clock.UTC(), r.DeletedAt)
		}
		if w := us.Row(want[i]); !reflect.DeepEqual(r.Row, w) {
			t.Errorf("user %d row %#v\nwant %#v", i, r.Row, w)
		}
	}
	if recs[0].ID != "5123001" || recs[1].ID != "5123002" {
		t.Errorf("ids %s %s", recs[0].ID, recs[1].ID)
	}
}

// tasksEnvelopePage is GET /workspaces/{wid}/tasks as documented: an object
// {data, page, per_page, sort_field, sort_order, total_count}, not a bare
// array.
const tasksEnvelopePage = `{
  "data": [
    {"id": 88001, "name": "Discovery", "workspace_id": 2230580, "project_id": 155392684, "user_id": null, "active": true,
     "estimated_seconds": null, "tracked_seconds": 5400, "at": "2024-12-12T09:14:03.512274Z", "server_deleted_at": null},
    {"id": 88002, "name": "Wrap-up", "workspace_id": 2230580, "project_id": 155392684, "user_id": 2166261, "active": false,
     "estimated_seconds": 7200, "tracked_seconds": 0, "at": "2024-12-13T17:40:00+00:00", "server_deleted_at": null}
  ],
  "page": 2,
  "per_page": 2,
  "sort_field": "name",
  "sort_order": "ASC",
  "total_count": 5
}`

func TestDecodeTasksEnvelope(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	now := time.Now()
	recs, env, err := d.decodeListing(clients.Tasks, 2, []byte(tasksEnvelopePage), now, now, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].ID != "88001" || recs[1].ID != "88002" {
		t.Fatalf("records %+v", recs)
	}
	if !recs[0].Version.Equal(time.Date(2024, 12, 12, 9, 14, 3, 512274000, time.UTC)) {
		t.Errorf("version %v", recs[0].Version)
	}
	if w := schema.Tasks.Row(schema.Values{"name": "Wrap-up", "is_active": false}); !reflect.DeepEqual(recs[1].Row, w) {
		t.Errorf("row %#v, want %#v", recs[1].Row, w)
	}
	if env != (envelope{total: 5, page: 2, perPage: 2}) {
		t.Errorf("envelope %+v", env)
	}
	// The bare array is accepted too, without a total.
	recs, env, err = d.decodeListing(clients.Tasks, 1, []byte(`[{"id":1,"name":"T","active":true,"at":"2024-12-12T09:14:03Z"}]`), now, now, time.UTC)
	if err != nil || len(recs) != 1 || env.total != -1 {
		t.Fatalf("bare array: %v, %d records, envelope %+v", err, len(recs), env)
	}
	// An empty listing may come as data: null.
	recs, env, err = d.decodeListing(clients.Tasks, 1, []byte(`{"data":null,"page":1,"per_page":200,"sort_field":"name","sort_order":"ASC","total_count":0}`), now, now, time.UTC)
	if err != nil || len(recs) != 0 || env.total != 0 {
		t.Fatalf("empty envelope: %v, %d records, envelope %+v", err, len(recs), env)
	}
	// An object without data is not a listing.
	if _, _, err := d.decodeListing(clients.Tasks, 1, []byte(`{"error":"nope"}`), now, now, time.UTC); err == nil {
		t.Error("an object without data passed")
	}
}

// meEntriesNearMidnight is /me/time_entries in the recorded shape (start
// with +00:00, at with microseconds, tags [] / null / names, duration -1
// while running), for a user whose /me timezone is Europe/Berlin. The first
// entry starts at 23:41 UTC on 14 Dec: 00:41 on 15 Dec in Berlin, the day
// Toggl's own reports give it; dated in UTC it would land on the 14th.
const meEntriesNearMidnight = `[
{"id":3730011001,"workspace_id":2230580,"project_id":193467840,"task_id":null,"billable":false,"start":"2024-12-14T23:41:07+00:00","stop":"2024-12-15T00:52:19+00:00","duration":4272,"description":"Reading","tags":["deep work","café"],"tag_ids":[17001,17002],"duronly":true,"at":"2024-12-15T00:52:21.118204Z","server_deleted_at":null,"user_id":2166261,"uid":2166261,"wid":2230580,"pid":193467840},
{"id":3730011002,"workspace_id":2230580,"project_id":null,"task_id":null,"billable":false,"start":"2024-12-14T21:05:00+00:00","stop":"2024-12-14T22:05:00+00:00","duration":3600,"description":null,"tags":[],"tag_ids":[],"duronly":true,"at":"2024-12-14T22:05:02.5Z","server_deleted_at":null,"user_id":2166261,"uid":2166261,"wid":2230580},
{"id":3730011003,"workspace_id":2230580,"project_id":null,"task_id":null,"billable":false,"start":"2024-12-15T23:10:00Z","stop":null,"duration":-1,"description":"late call","tags":null,"tag_ids":null,"duronly":true,"at":"2024-12-15T23:10:01.02Z","server_deleted_at":null,"user_id":2166261,"uid":2166261,"wid":2230580}
]`

func TestDecodeEntriesInTheUsersZone(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	d := newDecoder("acme", nil)
	clock := time.Date(2024, 12, 15, 23, 40, 1, 0, time.UTC)
	recs, _, err := d.decodeListing(clients.TimeEntries, 1, []byte(meEntriesNearMidnight), clock, clock, berlin)
	if err != nil {
		t.Fatal(err)
	}
	te := schema.TimeEntries
	day := func(d int) clients.Date { return clients.Date{Year: 2024, Month: 12, Day: d} }
	utc := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t.UTC() }
	for i, c := range []struct {
		spent   clients.Date
		start   time.Time
		end     any
		tags    any
		hours   clients.Decimal
		running bool
	}{
		{day(15), utc("2024-12-14T23:41:07Z"), utc("2024-12-15T00:52:19Z"), json.RawMessage(`["deep work","café"]`), "1.186667", false},
		{day(14), utc("2024-12-14T21:05:00Z"), utc("2024-12-14T22:05:00Z"), json.RawMessage(`[]`), "1", false},
		// 23:10 UTC on the 15th is 00:10 on the 16th in Berlin; running:
		// no end, and hours to the source's clock.
		{day(16), utc("2024-12-15T23:10:00Z"), nil, nil, "0.500278", true},
	} {
		r := recs[i]
		if got := te.Date(r, "spent_date"); got != c.spent {
			t.Errorf("entry %d: spent_date %v, want %v", i, got, c.spent)
		}
		row := r.Row
		if st, ok := row[te.Index("started_at")].(time.Time); !ok || !st.Equal(c.start) || st.Location() != time.UTC {
			t.Errorf("entry %d: started_at %#v, want %v", i, row[te.Index("started_at")], c.start)
		}
		if got := row[te.Index("ended_at")]; !reflect.DeepEqual(got, c.end) {
			t.Errorf("entry %d: ended_at %#v, want %#v", i, got, c.end)
		}
		if got := row[te.Index("time_zone")]; got != "Europe/Berlin" {
			t.Errorf("entry %d: time_zone %#v", i, got)
		}
		if got := row[te.Index("tags")]; !reflect.DeepEqual(got, c.tags) {
			t.Errorf("entry %d: tags %#v, want %#v", i, got, c.tags)
		}
		if te.Decimal(r, "hours") != c.hours || te.Bool(r, "is_running") != c.running {
			t.Errorf("entry %d: hours %s running %v", i, te.Decimal(r, "hours"), te.Bool(r, "is_running"))
		}
	}
	// Dated in UTC (no zone known), the first entry lands a day early.
	recs, err = d.decodePage(clients.TimeEntries, 1, []byte(meEntriesNearMidnight), clock, clock)
	if err != nil {
		t.Fatal(err)
	}
	if got := te.Date(recs[0], "spent_date"); got != day(14) || recs[0].Row[te.Index("time_zone")] != "UTC" {
		t.Errorf("UTC: spent_date %v, zone %#v", got, recs[0].Row[te.Index("time_zone")])
	}
}

// Toggl's quota window starts at the first request and lasts 60 minutes
// (support.toggl.com, api-webhook-limits). A 402 waits for the window the
// provider states in X-Toggl-Quota-Resets-In, else until 60 minutes after
// the first request of the window the client tracked.
func TestQuotaWaitForTheStatedWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 12, 50, 0, 0, time.UTC)
	first := now.Add(-50 * time.Minute) // 12:00, first request of the window
	h := http.Header{}
	h.Set("X-Toggl-Quota-Remaining", "0")
	h.Set("X-Toggl-Quota-Resets-In", "754")
	for _, tc := range []struct {
		name  string
		h     http.Header
		first time.Time
		want  time.Duration
	}{
		{"headers", h, first, 754 * time.Second},
		{"fractional seconds", http.Header{"X-Toggl-Quota-Resets-In": {"30.5"}}, first, 30500 * time.Millisecond},
		{"no headers: 60 minutes after the first request, and a second's margin", http.Header{}, first, 10*time.Minute + time.Second},
		{"no headers, window passed by our tracking", http.Header{}, now.Add(-2 * time.Hour), time.Hour},
		{"no headers, nothing tracked", http.Header{}, time.Time{}, time.Hour},
		{"unreadable header", http.Header{"X-Toggl-Quota-Resets-In": {"soon"}}, first, 10*time.Minute + time.Second},
		{"zero resets-in", http.Header{"X-Toggl-Quota-Resets-In": {"0"}}, first, time.Second},
	} {
		if got := quotaWait(tc.h, tc.first, time.Hour, now); got != tc.want {
			t.Errorf("%s: wait %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The window the client tracks starts at the first request after the
// previous one ended.
func TestQuotaTracksTheWindowStart(t *testing.T) {
	t.Parallel()
	var q Quota
	t0 := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	q.request(t0, time.Hour)
	q.request(t0.Add(59*time.Minute), time.Hour)
	if got := q.windowStart(); !got.Equal(t0) {
		t.Fatalf("window start %v, want %v", got, t0)
	}
	q.request(t0.Add(61*time.Minute), time.Hour)
	if got := q.windowStart(); !got.Equal(t0.Add(61 * time.Minute)) {
		t.Fatalf("window start %v, want the first request after the window", got)
	}
}

// Issue 22: the tasks envelope's counts size the page walk: each is
// bounded, and one out of bounds is refused naming its field.
func TestTasksEnvelopeCountsBounded(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	now := time.Now()
	for _, tc := range []struct{ field, value string }{
		{"total_count", "9223372036854775807"}, {"total_count", "100000001"},
		{"page", "-3"}, {"per_page", "4611686018427387904"},
	} {
		body := strings.Replace(tasksEnvelopePage, `"`+tc.field+`": `, `"`+tc.field+`": `+tc.value+`, "x`+tc.field+`": `, 1)
		_, _, err := d.decodeListing(clients.Tasks, 2, []byte(body), now, now, time.UTC)
		if err == nil || !strings.Contains(err.Error(), "field "+tc.field+":") {
			t.Fatalf("%s %s: want an error naming it, got %v", tc.field, tc.value, err)
		}
	}
}

// FuzzTasksEnvelopeCounts feeds hostile counts to the envelope decoder and
// the page walk after it: nothing may panic or take a count out of bounds.
func FuzzTasksEnvelopeCounts(f *testing.F) {
	for _, s := range []string{"5", "-1", "0", "9223372036854775807", "100000001", "1e300", "2.5", "null"} {
		f.Add(s, "2", "2")
		f.Add("5", s, "2")
		f.Add("5", "2", s)
	}
	d := newDecoder("acme", nil)
	now := time.Now()
	f.Fuzz(func(t *testing.T, total, page, perPage string) {
		body := `{"data":[{"id":9,"project_id":1,"name":"T","active":true,"at":"2026-01-02T10:00:00+00:00"}],"page":` + page +
			`,"per_page":` + perPage + `,"total_count":` + total + `}`
		recs, env, err := d.decodeListing(clients.Tasks, 1, []byte(body), now, now, time.UTC)
		if err != nil {
			return
		}
		if env.total > decode.MaxCount || env.page > decode.MaxCount || env.perPage > decode.MaxCount {
			t.Fatalf("count out of bounds taken: %+v", env)
		}
		w := pagewalk.New("tasks")
		_, _ = w.Page(context.Background(), walkPage(recs, env, max(env.page, 1), PerPage))
	})
}
