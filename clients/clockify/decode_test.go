package clockify

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/schema"
)

func TestHours(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"PT8H30M", "8.5"},
		{"PT45M", "0.75"},
		{"PT1H0M30S", "1.008333"},
		{"PT0S", "0"},
		{"PT8H", "8"},
		{"PT1M", "0.016667"},
		{"PT1S", "0.000278"},
		{"PT59M59S", "0.999722"},
		{"P1DT2H", "26"},
		{"P2D", "48"},
		{"PT1.5S", "0.000417"},
		{"PT0.0018S", "0.000001"}, // half a micro-hour rounds up
		{"PT0.0017S", "0"},
		{"PT36H", "36"},
		{"PT1000H", "1000"},
	} {
		got, err := hours(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("hours(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{
		"", "8h", "P", "PT", "T8H", "PT8X", "PT-1H", "-PT1H", "PTH", "PT1M1H", "PT1H1H", "PT1.5H",
		"PT1.S", "PT1.1234567891S", "PT99999999999999H", "P1D2H", "PT8H ", " PT8H", "P1.5D", "PT8h", "P1W",
	} {
		if got, err := hours(bad); err == nil {
			t.Errorf("hours(%q) = %q, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "ISO 8601") {
			t.Errorf("hours(%q) error %q does not say what it wants", bad, err)
		}
	}
}

const goodEntry = `{"id":"5b641568b07987035750505e","description":"Design review","tagIds":[],"userId":"5a0ab5acb07987125438b60f","billable":true,"taskId":null,"projectId":"5b641568b07987035750505f","workspaceId":"5a0ab5acb07987125438b60e","isLocked":false,"hourlyRate":{"amount":5000,"currency":"USD"},"timeInterval":{"start":"2026-03-01T23:30:00Z","end":"2026-03-02T08:00:00Z","duration":"PT8H30M"}}`

func arr(elems ...string) string { return "[" + strings.Join(elems, ",") + "]" }

func change(stampKey, stamp, doc string) string {
	return `{"id":"5b641568b07987035750505e","documentCode":"TIME_ENTRY","` + stampKey + `":"` + stamp + `","document":` + doc + `}`
}

// decodeCases feed both the table test and the fuzz corpus. feed is ""
// for a listing, else the feed kind.
var decodeCases = []struct {
	name, res, feed, body string
	field, what           string // "" when the page is good
}{
	{"good entry", "time_entries", "", arr(goodEntry), "", ""},
	{"good empty", "time_entries", "", `[]`, "", ""},
	{"good running", "time_entries", "", arr(strings.Replace(goodEntry, `"end":"2026-03-02T08:00:00Z","duration":"PT8H30M"`, `"end":null,"duration":null`, 1)), "", ""},
	{"good no duration", "time_entries", "", arr(strings.Replace(goodEntry, `"duration":"PT8H30M"`, `"duration":null`, 1)), "", ""},
	{"good project", "projects", "", `[{"id":"p1","name":"Web","clientId":"c1","archived":false,"billable":true}]`, "", ""},
	{"good client", "clients", "", `[{"id":"c1","name":"ACME","currencyCode":"EUR","archived":true}]`, "", ""},
	{"good user", "users", "", `[{"id":"u1","name":"Kim Allen","email":"kim@example.com","status":"ACTIVE"}]`, "", ""},
	{"good task", "tasks", "", `[{"id":"t1","name":"Design","projectId":"p1","status":"DONE"}]`, "", ""},
	{"good created", "time_entries", "created", arr(change("createdAt", "2026-03-02T08:00:00.123Z", goodEntry)), "", ""},
	{"good updated envelope", "time_entries", "updated", `{"response":` + arr(change("updatedAt", "2026-03-02T08:00:00Z", goodEntry)) + `}`, "", ""},
	{"good deleted empty document", "time_entries", "deleted", arr(change("deletedAt", "2026-03-02T08:00:00Z", `{}`)), "", ""},
	{"good deleted", "time_entries", "deleted", arr(change("deletedAt", "2026-03-02T08:00:00Z", goodEntry)), "", ""},
	{"html", "time_entries", "", "<html><body>Oops</body></html>", "(page)", "not JSON"},
	{"truncated", "time_entries", "", arr(goodEntry)[:80], "(page)", "not JSON"},
	{"envelope on a list", "time_entries", "", `{"response":[]}`, "(page)", "want an array, got object"},
	{"record not object", "projects", "", `[5]`, "projects[0]", "want an object, got number"},
	{"id missing", "time_entries", "", arr(strings.Replace(goodEntry, `"id":"5b641568b07987035750505e",`, ``, 1)), "time_entries[0].id", "missing"},
	{"id number", "users", "", `[{"id":7}]`, "users[0].id", "want string, got number"},
	{"id with slash", "users", "", `[{"id":"../x"}]`, "users[0].id", "want a Clockify id"},
	{"userId missing", "time_entries", "", arr(strings.Replace(goodEntry, `"userId":"5a0ab5acb07987125438b60f",`, ``, 1)), "time_entries[0].userId", "missing"},
	{"duration malformed", "time_entries", "", arr(strings.Replace(goodEntry, `PT8H30M`, `PT8X`, 1)), "time_entries[0].timeInterval.duration", "want an ISO 8601 duration"},
	{"good duration seconds", "time_entries", "", arr(strings.Replace(goodEntry, `"PT8H30M"`, `30600`, 1)), "", ""},
	{"duration boolean", "time_entries", "", arr(strings.Replace(goodEntry, `"PT8H30M"`, `true`, 1)), "time_entries[0].timeInterval.duration", "or a number of seconds, got boolean"},
	{"duration negative", "time_entries", "", arr(strings.Replace(goodEntry, `"PT8H30M"`, `-4`, 1)), "time_entries[0].timeInterval.duration", "want a number of seconds"},
	{"start missing", "time_entries", "", arr(strings.Replace(goodEntry, `"start":"2026-03-01T23:30:00Z",`, ``, 1)), "time_entries[0].timeInterval.start", "missing"},
	{"start bad", "time_entries", "", arr(strings.Replace(goodEntry, `2026-03-01T23:30:00Z`, `yesterday`, 1)), "time_entries[0].timeInterval.start", "want yyyy-MM-ddThh:mm:ssZ"},
	{"timeInterval missing", "time_entries", "", `[{"id":"e1","userId":"u1"}]`, "time_entries[0].timeInterval", "missing"},
	{"billable string", "time_entries", "", arr(strings.Replace(goodEntry, `"billable":true`, `"billable":"yes"`, 1)), "time_entries[0].billable", "want boolean, got string"},
	{"second record bad", "time_entries", "", arr(goodEntry, `{"id":"e2"}`), "time_entries[1].userId", "missing"},
	{"feed stamp missing", "time_entries", "updated", arr(change("createdAt", "2026-03-02T08:00:00Z", goodEntry)), "time_entries[0].updatedAt", "missing"},
	{"feed stamp bad", "time_entries", "deleted", arr(change("deletedAt", "03/02/2026", `{}`)), "time_entries[0].deletedAt", "want yyyy-MM-ddThh:mm:ssZ"},
	{"feed document missing", "time_entries", "created", `[{"id":"e1","createdAt":"2026-03-02T08:00:00Z"}]`, "time_entries[0].document", "missing"},
	{"feed bare ids", "time_entries", "updated", `["5b641568b07987035750505e"]`, "time_entries[0]", "want an object, got string"},
	{"feed document bad", "time_entries", "created", arr(change("createdAt", "2026-03-02T08:00:00Z", strings.Replace(goodEntry, `PT8H30M`, `8 hours`, 1))), "time_entries[0].document.timeInterval.duration", "ISO 8601"},
	{"feed id mismatch", "time_entries", "updated", arr(strings.Replace(change("updatedAt", "2026-03-02T08:00:00Z", goodEntry), `"id":"5b641568b07987035750505e","documentCode"`, `"id":"other","documentCode"`, 1)), "time_entries[0].id", "differs from document.id"},
	{"feed deleted no id", "time_entries", "deleted", `[{"deletedAt":"2026-03-02T08:00:00Z","document":{}}]`, "time_entries[0].id", "missing"},
	{"feed envelope without response", "time_entries", "deleted", `{"items":[]}`, "response", "missing"},
}

func decodeAny(d decoder, res, feed string, body []byte) ([]clients.Record, error) {
	if feed != "" {
		recs, _, err := d.decodeFeed(feedKind(feed), 4, body, time.Unix(7, 0))
		return recs, err
	}
	return d.decodeList(clients.Resource(res), 4, body, time.Unix(5, 0), time.Unix(7, 0))
}

func TestDecodePageTable(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := decodeAny(d, tc.res, tc.feed, []byte(tc.body))
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				for _, r := range recs {
					if r.ID == "" || r.Version.IsZero() || len(r.Raw) == 0 || !r.FetchedAt.Equal(time.Unix(7, 0)) {
						t.Errorf("record %+v", r)
					}
				}
				return
			}
			sourcetest.WantDecodeError(t, err, "acme", tc.res, 4, tc.field, tc.what)
		})
	}
}

var te = schema.TimeEntries

func TestDecodeEntryFields(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	recs, err := d.decodeList(clients.TimeEntries, 1, []byte(" [ "+goodEntry+" ] "), time.Date(2026, 3, 3, 0, 0, 0, 0, time.FixedZone("X", 3600)), time.Unix(7, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	want := te.Row(schema.Values{
		"spent_date": clients.Date{Year: 2026, Month: 3, Day: 1}, "hours": clients.Decimal("8.5"), "notes": "Design review",
		"user_id": "5a0ab5acb07987125438b60f", "project_id": "5b641568b07987035750505f", "billable": true,
		"started_at": time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC), "ended_at": time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC),
		"time_zone": "UTC", "tags": json.RawMessage(`[]`),
	})
	if r.ID != "5b641568b07987035750505e" || string(r.Raw) != goodEntry || r.Version != time.Date(2026, 3, 2, 23, 0, 0, 0, time.UTC) ||
		!reflect.DeepEqual(r.Row, want) || r.DeletedAt != nil {
		t.Fatalf("record %+v\nrow  %#v\nwant %#v", r, r.Row, want)
	}
	// clientId from the entry, else from a hydrated project.
	for body, want := range map[string]string{
		strings.Replace(goodEntry, `"isLocked":false`, `"isLocked":true,"clientId":"c9"`, 1):             "c9",
		strings.Replace(goodEntry, `"isLocked":false`, `"isLocked":true,"project":{"clientId":"c8"}`, 1): "c8",
		strings.Replace(goodEntry, `"isLocked":false`, `"isLocked":true,"clientId":null`, 1):             "",
	} {
		recs, err := d.decodeList(clients.TimeEntries, 1, []byte(arr(body)), time.Unix(5, 0), time.Unix(7, 0))
		if err != nil || te.Text(recs[0], "client_id") != want || !te.Bool(recs[0], "is_locked") {
			t.Errorf("clientId: %v %+v, want %q", err, recs, want)
		}
	}
	// Running entry.
	recs, err = d.decodeList(clients.TimeEntries, 1, []byte(decodeCases[2].body), time.Unix(5, 0), time.Unix(7, 0))
	if err != nil || !te.Bool(recs[0], "is_running") || te.Decimal(recs[0], "hours") != "0" {
		t.Fatalf("running: %v %#v", err, recs[0].Row)
	}
	// Duration null on a stopped entry: end − start.
	recs, err = d.decodeList(clients.TimeEntries, 1, []byte(decodeCases[3].body), time.Unix(5, 0), time.Unix(7, 0))
	if err != nil || te.Decimal(recs[0], "hours") != "8.5" {
		t.Fatalf("no duration: %v %#v", err, recs[0].Row)
	}
}

func TestDecodeFeed(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	body := arr(change("updatedAt", "2026-03-02T09:00:00.123+01:00", goodEntry))
	recs, n, err := d.decodeFeed(feedUpdated, 1, []byte(body), time.Unix(7, 0))
	if err != nil || n != 1 {
		t.Fatal(err, n)
	}
	r := recs[0]
	if r.ID != "5b641568b07987035750505e" || r.Version != time.Date(2026, 3, 2, 8, 0, 0, 123e6, time.UTC) || r.Version.Location() != time.UTC ||
		string(r.Raw) != goodEntry || r.DeletedAt != nil || r.Row == nil || te.Decimal(r, "hours") != "8.5" {
		t.Fatalf("updated record %+v", r)
	}
	del := change("deletedAt", "2026-03-02T08:00:00Z", `{}`)
	recs, _, err = d.decodeFeed(feedDeleted, 1, []byte(arr(del)), time.Unix(7, 0))
	if err != nil {
		t.Fatal(err)
	}
	r = recs[0]
	at := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	if r.ID != "5b641568b07987035750505e" || r.DeletedAt == nil || !r.DeletedAt.Equal(at) || !r.Version.Equal(at) || string(r.Raw) != del || r.Row != nil {
		t.Fatalf("tombstone %+v", r)
	}
	// The entity id is document.id when the document has one.
	recs, _, err = d.decodeFeed(feedDeleted, 1, []byte(`[{"id":"log1","deletedAt":"2026-03-02T08:00:00Z","document":{"id":"e7"}}]`), time.Unix(7, 0))
	if err != nil || recs[0].ID != "e7" {
		t.Fatalf("tombstone id: %v %+v", err, recs)
	}
}

func FuzzDecodePage(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.res, tc.feed, []byte(tc.body))
	}
	d := newDecoder("acme", nil)
	f.Fuzz(func(t *testing.T, res, feed string, body []byte) {
		switch feed {
		case "", "created", "updated", "deleted":
		default:
			feed = "updated"
		}
		if _, ok := schema.Lookup(clients.Resource(res)); !ok {
			res = string(clients.TimeEntries)
		}
		if feed != "" {
			res = string(clients.TimeEntries)
		}
		recs, err := decodeAny(d, res, feed, body)
		if err != nil {
			if !errors.Is(err, httpx.ErrDecode) || len(err.Error()) > 1000 {
				t.Fatalf("error %T %d bytes: %v", err, len(err.Error()), err)
			}
			return
		}
		for _, r := range recs {
			if !validID(r.ID) || r.Version.IsZero() || r.Version.Location() != time.UTC || len(r.Raw) == 0 || r.Raw[0] != '{' {
				t.Fatalf("incomplete record %+v", r)
			}
			if r.Row != nil && res == string(clients.TimeEntries) {
				h := te.Decimal(r, "hours")
				if _, err := hours(string(h)); h == "" || strings.HasPrefix(string(h), "-") || err == nil {
					// hours are decimal text, never a duration
					t.Fatalf("hours %q", h)
				}
			}
			if (r.DeletedAt != nil) != (feed == "deleted") {
				t.Fatalf("DeletedAt %v in a %q page", r.DeletedAt, feed)
			}
		}
	})
}
