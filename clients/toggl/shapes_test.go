package toggl

import (
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
	recs, env, err := d.decodeListing(clients.Tasks, 2, []byte(tasksEnvelopePage), now, now)
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
	recs, env, err = d.decodeListing(clients.Tasks, 1, []byte(`[{"id":1,"name":"T","active":true,"at":"2024-12-12T09:14:03Z"}]`), now, now)
	if err != nil || len(recs) != 1 || env.total != -1 {
		t.Fatalf("bare array: %v, %d records, envelope %+v", err, len(recs), env)
	}
	// An empty listing may come as data: null.
	recs, env, err = d.decodeListing(clients.Tasks, 1, []byte(`{"data":null,"page":1,"per_page":200,"sort_field":"name","sort_order":"ASC","total_count":0}`), now, now)
	if err != nil || len(recs) != 0 || env.total != 0 {
		t.Fatalf("empty envelope: %v, %d records, envelope %+v", err, len(recs), env)
	}
	// An object without data is not a listing.
	if _, _, err := d.decodeListing(clients.Tasks, 1, []byte(`{"error":"nope"}`), now, now); err == nil {
		t.Error("an object without data passed")
	}
}
