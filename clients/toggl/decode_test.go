package toggl

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
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
