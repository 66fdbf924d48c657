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
