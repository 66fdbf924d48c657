package toggl

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

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
