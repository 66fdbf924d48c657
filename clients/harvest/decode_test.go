package harvest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/clients/internal/sourcetest"
	"github.com/tidemarkhq/tidemark/clients/pagewalk"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

const goodEntry = `{"id":1,"spent_date":"2026-01-02","hours":1.5,"notes":"n","user":{"id":2,"name":"A"},"project":{"id":3},"task":{"id":4},"client":{"id":5},"invoice":null,"billable":true,"is_locked":false,"is_closed":true,"is_billed":false,"is_running":false,"updated_at":"2026-01-02T10:00:00Z"}`

func page(res, recs string) string {
	return `{"` + res + `":[` + recs + `],"per_page":2000,"page":1,"links":{"next":null}}`
}

// decodeCases feed both the table test and the fuzz corpus.
var decodeCases = []struct {
	name, res, body string
	field, what     string // "" when the page is good
}{
	{"good entry", "time_entries", page("time_entries", goodEntry), "", ""},
	{"good project", "projects", page("projects", `{"id":9,"name":"P","code":null,"client":{"id":1},"is_active":true,"is_billable":false,"updated_at":"2026-01-02T10:00:00Z"}`), "", ""},
	{"good client", "clients", page("clients", `{"id":9,"name":"C","currency":"EUR","is_active":true,"updated_at":"2026-01-02T10:00:00Z"}`), "", ""},
	{"good user", "users", page("users", `{"id":9,"first_name":"A","last_name":"B","email":"a@b","is_active":true,"updated_at":"2026-01-02T10:00:00Z"}`), "", ""},
	{"good task", "tasks", page("tasks", `{"id":9,"name":"T","is_active":true,"updated_at":"2026-01-02T10:00:00Z"}`), "", ""},
	{"empty page", "users", page("users", ``), "", ""},
	{"html", "time_entries", "<html><body>Oops</body></html>", "(page)", "not JSON"},
	{"truncated", "time_entries", page("time_entries", goodEntry)[:80], "(page)", "not JSON"},
	{"array missing", "time_entries", `{"projects":[],"links":{"next":null}}`, "time_entries", "missing"},
	{"array null", "time_entries", `{"time_entries":null,"links":{"next":null}}`, "time_entries", "missing"},
	{"array wrong type", "time_entries", `{"time_entries":{},"links":{"next":null}}`, "time_entries", "want array"},
	{"links missing", "time_entries", `{"time_entries":[]}`, "links", "missing"},
	{"links.next wrong type", "time_entries", `{"time_entries":[],"links":{"next":3}}`, "links.next", "want string"},
	{"record not object", "time_entries", page("time_entries", `5`), "time_entries[0]", "want an object"},
	{"id missing", "time_entries", page("time_entries", strings.Replace(goodEntry, `"id":1,`, ``, 1)), "time_entries[0].id", "missing"},
	{"id null", "users", page("users", `{"id":null,"updated_at":"2026-01-02T10:00:00Z"}`), "users[0].id", "missing"},
	{"id not integer", "users", page("users", `{"id":1.5,"updated_at":"2026-01-02T10:00:00Z"}`), "users[0].id", "want an integer id"},
	{"id bool", "users", page("users", `{"id":true,"updated_at":"2026-01-02T10:00:00Z"}`), "users[0].id", "want string, got bool"},
	{"updated_at missing", "tasks", page("tasks", `{"id":1,"name":"x"}`), "tasks[0].updated_at", "missing"},
	{"updated_at not RFC3339", "tasks", page("tasks", `{"id":1,"updated_at":"yesterday"}`), "tasks[0].updated_at", "want RFC 3339"},
	{"updated_at number", "tasks", page("tasks", `{"id":1,"updated_at":5}`), "tasks[0].updated_at", "want string, got number"},
	{"hours string", "time_entries", page("time_entries", strings.Replace(goodEntry, `"hours":1.5`, `"hours":"abc"`, 1)), "time_entries[0].hours", "invalid number literal"},
	{"hours missing", "time_entries", page("time_entries", strings.Replace(goodEntry, `"hours":1.5,`, ``, 1)), "time_entries[0].hours", "missing"},
	{"billable string", "time_entries", page("time_entries", strings.Replace(goodEntry, `"billable":true`, `"billable":"yes"`, 1)), "time_entries[0].billable", "want boolean, got string"},
	{"user missing", "time_entries", page("time_entries", strings.Replace(goodEntry, `"user":{"id":2,"name":"A"},`, ``, 1)), "time_entries[0].user.id", "missing"},
	{"user.id string", "time_entries", page("time_entries", strings.Replace(goodEntry, `"user":{"id":2`, `"user":{"id":"x"`, 1)), "time_entries[0].user.id", "invalid number literal"},
	{"invoice.id float", "time_entries", page("time_entries", strings.Replace(goodEntry, `"invoice":null`, `"invoice":{"id":2.5}`, 1)), "time_entries[0].invoice.id", "want an integer id"},
	{"spent_date bad", "time_entries", page("time_entries", strings.Replace(goodEntry, `2026-01-02"`, `02/01/2026"`, 1)), "time_entries[0].spent_date", "want YYYY-MM-DD"},
	{"notes number", "time_entries", page("time_entries", strings.Replace(goodEntry, `"notes":"n"`, `"notes":3`, 1)), "time_entries[0].notes", "want string, got number"},
	{"second record bad", "time_entries", page("time_entries", goodEntry+`,{"id":2}`), "time_entries[1].updated_at", "missing"},
}

func TestDecodePageTable(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, next, err := d.decodePage(clients.Resource(tc.res), 4, []byte(tc.body), time.Now())
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if next != "" {
					t.Errorf("next = %q", next)
				}
				for _, r := range recs {
					if r.ID == "" || r.Version.IsZero() || r.Raw == nil {
						t.Errorf("record %+v", r)
					}
				}
				return
			}
			sourcetest.WantDecodeError(t, err, "acme", tc.res, 4, tc.field, tc.what)
			var he *httpx.Error
			if errors.As(err, &he) && len(he.Body) > httpx.SnippetLen+len("…") {
				t.Errorf("body snippet %d bytes", len(he.Body))
			}
		})
	}
}

func TestDecodeEntryFields(t *testing.T) {
	t.Parallel()
	recs, _, err := newDecoder("acme", nil).decodePage(clients.TimeEntries, 1, []byte(page("time_entries", goodEntry)), time.Unix(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	want := schema.TimeEntries.Row(schema.Values{
		"spent_date": clients.Date{Year: 2026, Month: 1, Day: 2}, "hours": clients.Decimal("1.5"), "notes": "n",
		"user_id": "2", "project_id": "3", "task_id": "4", "client_id": "5", "billable": true, "is_closed": true,
	})
	if r.ID != "1" || !r.Version.Equal(time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)) || !r.FetchedAt.Equal(time.Unix(5, 0)) ||
		string(r.Raw) != goodEntry || !reflect.DeepEqual(r.Row, want) {
		t.Fatalf("record %+v\nrow  %#v\nwant %#v", r, r.Row, want)
	}
	if cap(r.Row) != len(r.Row) {
		t.Errorf("row has spare capacity %d: appending to it would write into the next record's", cap(r.Row)-len(r.Row))
	}
}

func FuzzDecodePage(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.res, []byte(tc.body))
	}
	d := newDecoder("acme", nil)
	f.Fuzz(func(t *testing.T, res string, body []byte) {
		recs, _, err := d.decodePage(clients.Resource(res), 1, body, time.Now())
		if err != nil {
			// Names come from the request (resource) and the body excerpt
			// (bounded); with a real resource the message stays short.
			if _, ok := schema.Lookup(clients.Resource(res)); ok && len(err.Error()) > 1000 {
				t.Fatalf("error too long: %d", len(err.Error()))
			}
			return
		}
		for _, r := range recs {
			if r.ID == "" || r.Version.IsZero() || len(r.Raw) == 0 {
				t.Fatalf("incomplete record %+v", r)
			}
		}
	})
}

// benchPage renders a realistic 2000-entry page (~1 KB per entry, as real
// Harvest entries with nested objects).
func benchPage() []byte {
	var b strings.Builder
	b.WriteString(`{"time_entries":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"spent_date":"2026-01-%02d","user":{"id":1782959,"name":"Kim Allen"},"client":{"id":5735774,"name":"ABC Corp","currency":"USD"},"project":{"id":14307913,"name":"Marketing Website","code":"MW"},"task":{"id":8083365,"name":"Graphic Design"},"user_assignment":{"id":125068553,"is_project_manager":true,"is_active":true,"budget":null,"created_at":"2017-06-26T22:32:52Z","updated_at":"2017-06-26T22:32:52Z","hourly_rate":100.0},"task_assignment":{"id":155502709,"billable":true,"is_active":true,"created_at":"2017-06-26T21:36:23Z","updated_at":"2017-06-26T21:36:23Z","hourly_rate":100.0,"budget":null},"hours":2.11,"hours_without_timer":2.11,"rounded_hours":2.25,"notes":"Adding CSS styling","created_at":"2017-06-27T15:50:15Z","updated_at":"2017-06-27T16:47:14Z","is_locked":true,"locked_reason":"Item Approved and Locked for this Time Period","is_closed":true,"is_billed":false,"timer_started_at":null,"started_time":"3:00pm","ended_time":"5:00pm","is_running":false,"invoice":null,"external_reference":null,"billable":true,"budgeted":true,"billable_rate":100.0,"cost_rate":50.0}`, 636709355+i, i%28+1)
	}
	b.WriteString(`],"per_page":2000,"total_pages":1,"total_entries":2000,"next_page":null,"previous_page":null,"page":1,"links":{"first":"https://api.harvestapp.com/v2/time_entries?page=1&per_page=2000","next":null,"previous":null,"last":"https://api.harvestapp.com/v2/time_entries?page=1&per_page=2000"}}`)
	return []byte(b.String())
}

func BenchmarkDecodePage2000(b *testing.B) {
	body := benchPage()
	d := newDecoder("acme", nil)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		recs, _, err := d.decodePage(clients.TimeEntries, 1, body, time.Time{})
		if err != nil || len(recs) != 2000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/record")
}

// FuzzDecodeMatchesEncodingJSON checks the single-pass decoder against the
// encoding/json decoding it replaced: a time-entry page that one accepts,
// the other accepts too, with the same records (Raw compared after
// compacting: encoding/json's RawMessage keeps the same bytes).
func FuzzDecodeMatchesEncodingJSON(f *testing.F) {
	for _, tc := range decodeCases {
		if tc.res == "time_entries" {
			f.Add([]byte(tc.body))
		}
	}
	f.Add([]byte(page("time_entries", strings.Replace(goodEntry, `"notes":"n"`, `"notes":"caf\u00e9 \"x\"\n\ud83d\ude00"`, 1))))
	f.Add([]byte(page("time_entries", strings.Replace(goodEntry, `"id":1,`, `"id":"7","id":null,`, 1))))
	f.Add([]byte(page("time_entries", strings.Replace(goodEntry, `"hours":1.5`, `"hours":"1.25e1"`, 1))))
	f.Add([]byte(page("time_entries", strings.Replace(goodEntry, `2026-01-02T10:00:00Z`, `2026-01-02T10:00:00.5+02:00`, 1))))
	f.Add([]byte(page("time_entries", strings.Replace(goodEntry, `2026-01-02"`, `2026-02-30"`, 1))))
	d := newDecoder("acme", nil)
	f.Fuzz(func(t *testing.T, body []byte) { matchOracle(t, d, clients.TimeEntries, body) })
}

// matchOracle fails t unless d and encoding/json (oraclePage) agree on body
// as a page of r: both accept it with the same records, or both refuse it.
func matchOracle(t *testing.T, d decoder, r clients.Resource, body []byte) {
	t.Helper()
	got, _, err := d.decodePage(r, 1, body, time.Time{})
	want, ok := oraclePage(r, body)
	if (err == nil) != ok {
		t.Fatalf("fast decoder err=%v, encoding/json ok=%v", err, ok)
	}
	if !ok {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i := range got {
		if g, w := recordText(got[i]), recordText(want[i]); g != w {
			t.Fatalf("record %d\n got %s\nwant %s", i, g, w)
		}
	}
}

// BenchmarkDecodePage2000EncodingJSON is the encoding/json decoding that
// the single-pass decoder replaced (kept as the fuzz oracle), on the same
// page: run both in one invocation and compare.
func BenchmarkDecodePage2000EncodingJSON(b *testing.B) {
	body := benchPage()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		recs, ok := oracleEntries(body)
		if !ok || len(recs) != 2000 {
			b.Fatal("decode failed")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2000, "ns/record")
}

// FuzzDecodeResourcesMatchEncodingJSON does the same for every resource.
func FuzzDecodeResourcesMatchEncodingJSON(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add(tc.res, []byte(tc.body))
	}
	f.Add("projects", []byte(page("projects", `{"id":9,"NAME":"P","code":"X","code":null,"client":{"id":"12"},"is_active":true,"updated_at":"2026-01-02T10:00:00Z","extra":[1,{"a":null}]}`)))
	f.Add("users", []byte(page("users", `{"id":9,"first_name":"A\u00e9","email":null,"updated_at":"2026-01-02T10:00:00+01:00"}`)))
	d := newDecoder("acme", nil)
	f.Fuzz(func(t *testing.T, res string, body []byte) {
		r := clients.Resource(res)
		if _, ok := schema.Lookup(r); !ok {
			return
		}
		matchOracle(t, d, r, body)
	})
}

// approval_status and external_reference get columns (issue 10): what
// reports filter on. The reference is kept as sent (an object, or null).
func TestDecodeApprovalAndExternalReference(t *testing.T) {
	t.Parallel()
	ext := `{"id":"8412","group_id":"1102","account_id":null,"permalink":"https://tracker.example.com/issues/8412","service":"tracker.example.com","service_icon_url":"https://tracker.example.com/favicon.png"}`
	entry := strings.Replace(goodEntry, `"is_closed":true`, `"is_closed":true,"approval_status":"approved","external_reference":`+ext, 1)
	null := strings.Replace(goodEntry, `"is_closed":true`, `"is_closed":true,"approval_status":null,"external_reference":null`, 1)
	recs, _, err := newDecoder("acme", nil).decodePage(clients.TimeEntries, 1, []byte(page("time_entries", entry+","+strings.Replace(null, `"id":1`, `"id":2`, 1))), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	te := schema.TimeEntries
	if got := te.Text(recs[0], "approval_status"); got != "approved" {
		t.Errorf("approval_status %q", got)
	}
	if got := recs[0].Row[te.Index("external_reference")]; fmt.Sprintf("%s", got) != ext {
		t.Errorf("external_reference %s", got)
	}
	if !te.IsNull(recs[1], "approval_status") || !te.IsNull(recs[1], "external_reference") {
		t.Errorf("nulls: %#v", recs[1].Row)
	}
	bad := strings.Replace(goodEntry, `"is_closed":true`, `"is_closed":true,"external_reference":"8412"`, 1)
	_, _, err = newDecoder("acme", nil).decodePage(clients.TimeEntries, 1, []byte(page("time_entries", bad)), time.Now())
	sourcetest.WantDecodeError(t, err, "acme", "time_entries", 1, "time_entries[0].external_reference", "want an object or null")
}

// The encoding/json decoding that the single-pass decoder replaced, kept as
// the reference the differential fuzz target compares against.

type ref struct {
	ID json.Number `json:"id"`
}

type common struct {
	ID        json.Number `json:"id"`
	UpdatedAt string      `json:"updated_at"`
}

type projectJSON struct {
	common
	Name       string  `json:"name"`
	Code       *string `json:"code"`
	Client     ref     `json:"client"`
	IsActive   bool    `json:"is_active"`
	IsBillable bool    `json:"is_billable"`
}

type clientJSON struct {
	common
	Name     string  `json:"name"`
	Currency *string `json:"currency"`
	IsActive bool    `json:"is_active"`
}

type userJSON struct {
	common
	FirstName string  `json:"first_name"`
	LastName  string  `json:"last_name"`
	Email     *string `json:"email"`
	IsActive  bool    `json:"is_active"`
}

type taskJSON struct {
	common
	Name     string `json:"name"`
	IsActive bool   `json:"is_active"`
}

func (c *common) fill(rec *clients.Record) *decode.FieldError {
	s, ok := id(string(c.ID))
	if !ok {
		if c.ID == "" {
			return decode.Missing("id")
		}
		return decode.Field("id", fmt.Sprintf("want an integer id, got %q", string(c.ID)))
	}
	rec.ID = s
	if c.UpdatedAt == "" {
		return decode.Missing("updated_at")
	}
	t, err := time.Parse(time.RFC3339, c.UpdatedAt)
	if err != nil {
		return decode.Field("updated_at", fmt.Sprintf("want RFC 3339, got %q", c.UpdatedAt))
	}
	rec.Version = t.UTC()
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func project(j *projectJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	client, fe := optRef(string(j.Client.ID), "client.id")
	if fe != nil {
		return fe
	}
	p := schema.Projects
	row[p.Index("name")], row[p.Index("code")], row[p.Index("client_id")] = j.Name, schema.OrNull(deref(j.Code)), schema.OrNull(client)
	row[p.Index("is_active")], row[p.Index("is_billable")] = j.IsActive, j.IsBillable
	return nil
}

func client(j *clientJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	c := schema.Clients
	row[c.Index("name")], row[c.Index("currency")], row[c.Index("is_active")] = j.Name, schema.OrNull(deref(j.Currency)), j.IsActive
	return nil
}

func user(j *userJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	u := schema.Users
	row[u.Index("first_name")], row[u.Index("last_name")] = schema.OrNull(j.FirstName), schema.OrNull(j.LastName)
	row[u.Index("email")], row[u.Index("is_active")] = schema.OrNull(deref(j.Email)), j.IsActive
	return nil
}

func task(j *taskJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	row[schema.Tasks.Index("name")], row[schema.Tasks.Index("is_active")] = j.Name, j.IsActive
	return nil
}

type timeEntryJSON struct {
	common
	SpentDate string          `json:"spent_date"`
	Hours     json.Number     `json:"hours"`
	Notes     *string         `json:"notes"`
	User      ref             `json:"user"`
	Project   ref             `json:"project"`
	Task      ref             `json:"task"`
	Client    ref             `json:"client"`
	Invoice   ref             `json:"invoice"`
	Billable  bool            `json:"billable"`
	IsLocked  bool            `json:"is_locked"`
	IsClosed  bool            `json:"is_closed"`
	IsBilled  bool            `json:"is_billed"`
	IsRunning bool            `json:"is_running"`
	Approval  *string         `json:"approval_status"`
	ExtRef    json.RawMessage `json:"external_reference"`
}

func timeEntry(j *timeEntryJSON, row []any, rec *clients.Record) *decode.FieldError {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	if j.SpentDate == "" {
		return decode.Missing("spent_date")
	}
	d, err := clients.ParseDate(j.SpentDate)
	if err != nil {
		return decode.Field("spent_date", fmt.Sprintf("want YYYY-MM-DD, got %q", j.SpentDate))
	}
	if !validDecimal(string(j.Hours)) {
		return decode.Field("hours", "missing or not a number")
	}
	v := schema.Values{
		"spent_date": d, "hours": clients.Decimal(j.Hours),
		"billable": j.Billable, "is_locked": j.IsLocked, "is_closed": j.IsClosed, "is_billed": j.IsBilled, "is_running": j.IsRunning,
	}
	for _, r := range []struct {
		col, field string
		ref        ref
		read       func(ref, field string) (string, *decode.FieldError)
	}{
		{"user_id", "user.id", j.User, reqRef},
		{"project_id", "project.id", j.Project, reqRef},
		{"task_id", "task.id", j.Task, optRef},
		{"client_id", "client.id", j.Client, optRef},
		{"invoice_id", "invoice.id", j.Invoice, optRef},
	} {
		id, fe := r.read(string(r.ref.ID), r.field)
		if fe != nil {
			return fe
		}
		v[r.col] = id
	}
	if j.Notes != nil {
		v["notes"] = *j.Notes
	}
	if j.Approval != nil && *j.Approval != "" {
		v["approval_status"] = *j.Approval
	}
	if len(j.ExtRef) > 0 && string(j.ExtRef) != "null" {
		if j.ExtRef[0] != '{' {
			return decode.Field("external_reference", "want an object or null")
		}
		v["external_reference"] = j.ExtRef
	}
	copy(row, schema.TimeEntries.Row(v))
	return nil
}

// oracleEntries decodes a page of time entries the encoding/json way.
func oracleEntries(body []byte) ([]clients.Record, bool) {
	var env struct {
		TimeEntries []json.RawMessage `json:"time_entries"`
		Links       *struct {
			Next *string `json:"next"`
		} `json:"links"`
	}
	if json.Unmarshal(body, &env) != nil || env.TimeEntries == nil || env.Links == nil {
		return nil, false
	}
	recs := make([]clients.Record, len(env.TimeEntries))
	for i, raw := range env.TimeEntries {
		var j timeEntryJSON
		if json.Unmarshal(raw, &j) != nil {
			return nil, false
		}
		recs[i].Row = make([]any, schema.TimeEntries.Width())
		if timeEntry(&j, recs[i].Row, &recs[i]) != nil {
			return nil, false
		}
		recs[i].Raw = raw
	}
	return recs, true
}

// recordText renders a record with its row's values and their Go types.
func recordText(r clients.Record) string {
	return fmt.Sprintf("%s %s %s %#v", r.ID, r.Version.Format("2006-01-02T15:04:05.999999999Z07:00"), r.Raw, r.Row)
}

// oraclePage decodes a page of any resource the encoding/json way.
func oraclePage(r clients.Resource, body []byte) ([]clients.Record, bool) {
	if !oracleCounts(body) {
		return nil, false
	}
	if r == clients.TimeEntries {
		return oracleEntries(body)
	}
	var env map[string]json.RawMessage
	var links struct {
		Next *string `json:"next"`
	}
	var arr []json.RawMessage
	if json.Unmarshal(body, &env) != nil {
		return nil, false
	}
	// The envelope as a struct would read it: exact key, else case-folded.
	get := func(name string) (json.RawMessage, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		for k, v := range env {
			if strings.EqualFold(k, name) {
				return v, true
			}
		}
		return nil, false
	}
	var envS struct {
		Arr   []json.RawMessage `json:"-"`
		Links *struct {
			Next *string `json:"next"`
		} `json:"links"`
	}
	if json.Unmarshal(body, &envS) != nil || envS.Links == nil {
		return nil, false
	}
	_ = links
	raw, ok := get(string(r))
	if !ok || json.Unmarshal(raw, &arr) != nil || arr == nil {
		return nil, false
	}
	recs := make([]clients.Record, len(arr))
	d := newDecoder("acme", nil)
	var err error
	switch r {
	case clients.Projects:
		err = decode.Objects(d.Errors, r, schema.Projects, 1, arr, recs, time.Time{}, project)
	case clients.Clients:
		err = decode.Objects(d.Errors, r, schema.Clients, 1, arr, recs, time.Time{}, client)
	case clients.Users:
		err = decode.Objects(d.Errors, r, schema.Users, 1, arr, recs, time.Time{}, user)
	case clients.Tasks:
		err = decode.Objects(d.Errors, r, schema.Tasks, 1, arr, recs, time.Time{}, task)
	default:
		return nil, false
	}
	return recs, err == nil
}

// The page size the walk checks pages against is the one served: the
// envelope's per_page, else links.next's, else the one asked.
func TestWalkPageSizeIsTheOneServed(t *testing.T) {
	next := "https://api.harvestapp.com/v2/time_entries?page=2&per_page=100"
	for _, tc := range []struct {
		perPage int
		next    string
		want    int
	}{{100, next, 100}, {-1, next, 100}, {-1, "", 2000}, {-1, "https://api.harvestapp.com/v2/time_entries?page=2", 2000}} {
		env := envelope{perPage: tc.perPage, next: tc.next, totalEntries: -1, totalPages: -1}
		if got := walkPage(nil, env, 2000, time.Time{}).Size; got != tc.want {
			t.Errorf("per_page %d, next %q: size %d, want %d", tc.perPage, tc.next, got, tc.want)
		}
	}
	if env, err := scanEnvelope([]byte(`{"time_entries":[],"per_page":100,"links":{"next":null}}`), clients.TimeEntries, nil); err != nil || env.perPage != 100 {
		t.Errorf("envelope per_page = %d (%v), want 100", env.perPage, err)
	}
}

// oracleCounts is the envelope's count rule, read with encoding/json: every
// top-level total_entries, total_pages or per_page (any case) that is a
// number is a whole count in 0..decode.MaxCount.
func oracleCounts(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return true // not an object: the rest of the oracle decides
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return true
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return true
		}
		counted := false
		for _, n := range []string{"total_entries", "total_pages", "per_page"} {
			counted = counted || strings.EqualFold(key, n)
		}
		if c := decode.FirstByte(v); !counted || (c != '-' && (c < '0' || c > '9')) {
			continue
		}
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || decode.Count(key, n) != nil {
			return false
		}
	}
	return true
}

// countCases are hostile envelope counts: each must be refused naming its
// field (wantField) or taken, and never size an allocation.
var countCases = []struct{ entries, pages, perPage, wantField string }{
	{"3", "1", "100", ""},
	{"9223372036854775807", "1", "100", "total_entries"},
	{"99999999999999999999999", "1", "100", "total_entries"},
	{"-1", "1", "100", "total_entries"},
	{"100000001", "1", "100", "total_entries"},
	{"3", "-5", "100", "total_pages"},
	{"3", "1e300", "100", "total_pages"},
	{"3", "1", "4611686018427387904", "per_page"},
	{"3", "1", "2.5", "per_page"},
	{"100000000", "100000000", "100000000", ""},
}

func countsPage(entries, pages, perPage string) []byte {
	return []byte(`{"time_entries":[` + goodEntry + `],"total_entries":` + entries + `,"total_pages":` + pages +
		`,"per_page":` + perPage + `,"links":{"next":null}}`)
}

// Issue 22: a huge total_entries made the page walk's Bloom filter panic
// in make, on the fetch goroutine, taking the daemon down. Every count is
// bounded in the envelope decoder, with an error naming the field.
func TestEnvelopeCountsBounded(t *testing.T) {
	t.Parallel()
	d := newDecoder("acme", nil)
	for _, tc := range countCases {
		recs, env, err := d.decodeListing(clients.TimeEntries, 1, countsPage(tc.entries, tc.pages, tc.perPage), time.Now())
		if tc.wantField == "" {
			if err != nil || len(recs) != 1 {
				t.Fatalf("%+v: %v", tc, err)
			}
			walkCounts(t, recs, env)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "field "+tc.wantField+":") {
			t.Fatalf("%+v: want an error naming %s, got %v", tc, tc.wantField, err)
		}
	}
}

// walkCounts hands a decoded page to a page walk, as the client does.
func walkCounts(t *testing.T, recs []clients.Record, env envelope) {
	t.Helper()
	if env.totalEntries > decode.MaxCount || env.totalPages > decode.MaxCount || env.perPage > decode.MaxCount {
		t.Fatalf("count out of bounds taken: %+v", env)
	}
	w := pagewalk.New("time_entries")
	_, _ = w.Page(context.Background(), walkPage(recs, env, MaxPerPage, time.Now()))
}

// FuzzEnvelopeCounts feeds hostile numbers to the envelope decoder and the
// page walk after it: nothing may panic or take a count out of bounds.
func FuzzEnvelopeCounts(f *testing.F) {
	for _, tc := range countCases {
		f.Add(tc.entries, tc.pages, tc.perPage)
	}
	d := newDecoder("acme", nil)
	f.Fuzz(func(t *testing.T, entries, pages, perPage string) {
		recs, env, err := d.decodeListing(clients.TimeEntries, 1, countsPage(entries, pages, perPage), time.Now())
		if err != nil {
			return
		}
		walkCounts(t, recs, env)
	})
}
