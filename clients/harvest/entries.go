package harvest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// entryJSON holds a time entry's fields as read from the body: text cut
// from the page's one string copy, "" when absent or null.
type entryJSON struct {
	identity
	spentDate   string
	hours       string
	refs        [len(entryRefs)]string // the ids of entryRefs
	notes       string
	hasNotes    bool // notes present and not null
	approval    string
	hasApproval bool
	extRef      []byte                // external_reference as sent, nil when null
	flags       [len(entryFlags)]bool // entryFlags
}

// entryRefs are the {"id": …} objects an entry names, with the column of
// each id; user and project are required.
var entryRefs = [...]struct {
	key, field string
	required   bool
	col        int
}{
	{"user", "user.id", true, schema.TE.User},
	{"project", "project.id", true, schema.TE.Project},
	{"task", "task.id", false, schema.TE.Task},
	{"client", "client.id", false, schema.TE.Client},
	{"invoice", "invoice.id", false, schema.TE.Invoice},
}

// entryFlags are an entry's booleans, with the column of each.
var entryFlags = [...]struct {
	key string
	col int
}{
	{"billable", schema.TE.Billable}, {"is_locked", schema.TE.Locked}, {"is_closed", schema.TE.Closed}, {"is_billed", schema.TE.Billed}, {"is_running", schema.TE.Running},
}

var (
	entryKeys = []string{"id", "updated_at", "created_at", "spent_date", "hours", "notes", "user", "project", "task", "client",
		"invoice", "billable", "is_locked", "is_closed", "is_billed", "is_running", "approval_status", "external_reference"}
	refKeys = []string{"id"}
)

// canon returns the name in names that key stands for, as encoding/json
// matches keys: exactly, else without regard to case (Unicode simple
// folding); "" when none.
func canon(key []byte, names []string) string {
	for _, n := range names {
		if string(key) == n {
			return n
		}
	}
	ascii, upper := true, false
	for _, c := range key {
		switch {
		case c >= 0x80:
			ascii = false
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	if ascii && !upper {
		return "" // lower-case ASCII: only an exact match could do
	}
	for _, n := range names {
		if ascii {
			if len(key) == len(n) && asciiFold(key, n) {
				return n
			}
		} else if strings.EqualFold(string(key), n) {
			return n
		}
	}
	return ""
}

func asciiFold(key []byte, n string) bool {
	for i := range len(n) {
		a, b := key[i], n[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// errStop ends an object walk at the first wrong-typed field.
var errStop = errors.New("stop")

// te is the table entries fill.
var te = schema.TimeEntries

// entrySink decodes time entries during the envelope scan, in one pass
// and without reflection. Strings other than ids are cut from one string
// copy of the body (ids are copied on their own: reconcile keeps them after
// the page is gone). The rows of a page share one block of values.
type entrySink struct {
	body    []byte
	text    string
	fetched time.Time
	recs    []clients.Record
	rows    []any // te.Width() values per record
	// err is the first bad record's, at index errAt.
	err   *decode.FieldError
	errAt int
	box   boxer
}

// boxer hands out one interface value per distinct id, day or amount of a
// page: the ids, days and hours of a page's records repeat, and boxing each
// value for Record.Row would cost an allocation apiece.
type boxer struct {
	strs map[string]any
	decs map[string]any
	days map[clients.Date]any
}

func (b *boxer) str(v string) any {
	if v == "" {
		return nil
	}
	if x, ok := b.strs[v]; ok {
		return x
	}
	if b.strs == nil {
		b.strs = map[string]any{}
	}
	x := any(v)
	b.strs[v] = x
	return x
}

func (b *boxer) dec(v string) any {
	if x, ok := b.decs[v]; ok {
		return x
	}
	if b.decs == nil {
		b.decs = map[string]any{}
	}
	x := any(clients.Decimal(v))
	b.decs[v] = x
	return x
}

func (b *boxer) day(d clients.Date) any {
	if x, ok := b.days[d]; ok {
		return x
	}
	if b.days == nil {
		b.days = map[clients.Date]any{}
	}
	x := any(d)
	b.days[d] = x
	return x
}

func newEntrySink(body []byte, fetched time.Time) *entrySink {
	n := len(body)/700 + 1 // Harvest entries are 0.7–1.2 kB
	return &entrySink{body: body, text: bodyText(body), fetched: fetched,
		recs: make([]clients.Record, 0, n), rows: make([]any, 0, n*te.Width())}
}

func (k *entrySink) reset() {
	k.recs, k.rows, k.err = k.recs[:0], k.rows[:0], nil
}

func (k *entrySink) elem(s *scanner, i, lo int) bool {
	if k.err != nil {
		return false
	}
	var e entryJSON
	if fe := e.read(s, k.text); fe != nil {
		k.err, k.errAt = fe, i
		return false
	}
	k.recs = append(k.recs, clients.Record{Raw: k.body[lo:s.i:s.i], FetchedAt: k.fetched})
	w := te.Width()
	k.rows = append(k.rows, make([]any, w)...)
	if fe := e.fill(k.rows[i*w:(i+1)*w], &k.recs[i], &k.box); fe != nil {
		k.err, k.errAt = fe, i
	}
	return true
}

// records links each record to its row, once the block has stopped
// growing.
func (k *entrySink) records() []clients.Record {
	w := te.Width()
	for i := range k.recs {
		k.recs[i].Row = k.rows[i*w : (i+1)*w : (i+1)*w]
	}
	return k.recs
}

// read reads one entry at the scanner's cursor. Like encoding/json, null
// leaves a field as it was and the first wrong-typed field is the error.
func (e *entryJSON) read(s *scanner, text string) *decode.FieldError {
	return s.record(text, entryKeys, &e.identity, func(k string) *decode.FieldError {
		switch k {
		case "spent_date":
			return s.strField(text, &e.spentDate, "spent_date")
		case "hours":
			return s.num(text, &e.hours, "hours")
		case "notes":
			return s.optStr(text, &e.notes, &e.hasNotes, "notes")
		case "approval_status":
			return s.optStr(text, &e.approval, &e.hasApproval, "approval_status")
		case "external_reference":
			return s.rawObject(&e.extRef, "external_reference")
		}
		for i, r := range entryRefs {
			if k == r.key {
				return s.ref(text, &e.refs[i], r.key, r.field)
			}
		}
		for i, f := range entryFlags {
			if k == f.key {
				return s.boolean(&e.flags[i], f.key)
			}
		}
		return s.skipFE()
	})
}

// text returns the string value at the cursor: a slice of text when it
// holds no escape, else its decoded copy.
func (s *scanner) text(text string) (string, error) {
	lo, hi, plain, err := s.str()
	if err != nil {
		return "", err
	}
	if plain {
		return text[lo:hi], nil
	}
	var out string
	if err := json.Unmarshal(s.b[lo-1:hi+1], &out); err != nil {
		return "", errSyntax
	}
	return out, nil
}

// syntaxFE is returned by the field readers on a syntax error, which the
// envelope scan has already ruled out.
var syntaxFE = decode.Field("", "not JSON")

// num reads a json.Number field: a number, or a string holding one.
func (s *scanner) num(text string, dst *string, field string) *decode.FieldError {
	switch k := s.peek(); k {
	case kNumber:
		lo, hi, err := s.number()
		if err != nil {
			return syntaxFE
		}
		*dst = text[lo:hi]
	case kString:
		v, err := s.text(text)
		if err != nil {
			return syntaxFE
		}
		if !isNumber(v) {
			return decode.Field(field, fmt.Sprintf("invalid number literal %q", v))
		}
		*dst = v
	default:
		// encoding/json's words: a json.Number is of string kind.
		return s.other(k, field, "string")
	}
	return nil
}

// other ends a field reader on a value that is not of its kind: null
// reads as nothing (the reader has cleared what null clears), anything
// else is the field's error.
func (s *scanner) other(k kind, field, want string) *decode.FieldError {
	if k != kNull {
		return decode.Field(field, "want "+want+", got "+k.String())
	}
	_, _, _ = s.literal()
	return nil
}

func isNumber(v string) bool {
	if v == "" {
		return false
	}
	t := scanner{b: []byte(v)}
	_, hi, err := t.number()
	return err == nil && hi == len(v)
}

// strField reads a string or null ("") into dst.
func (s *scanner) strField(text string, dst *string, field string) *decode.FieldError {
	var set bool
	return s.optStr(text, dst, &set, field)
}

// rawObject keeps an object value as it was sent (nil for null).
func (s *scanner) rawObject(dst *[]byte, field string) *decode.FieldError {
	k := s.peek()
	if k != kObject {
		if k == kNull {
			*dst = nil
		}
		return s.other(k, field, "an object or null")
	}
	lo := s.i
	if s.skip() != nil {
		return syntaxFE
	}
	*dst = s.b[lo:s.i:s.i]
	return nil
}

// optStr reads a string into dst, set saying it was there: null clears
// both.
func (s *scanner) optStr(text string, dst *string, set *bool, field string) *decode.FieldError {
	k := s.peek()
	if k != kString {
		if k == kNull {
			*dst, *set = "", false
		}
		return s.other(k, field, "string")
	}
	v, err := s.text(text)
	if err != nil {
		return syntaxFE
	}
	*dst, *set = v, true
	return nil
}

func (s *scanner) boolean(dst *bool, field string) *decode.FieldError {
	k := s.peek()
	if k != kBool {
		return s.other(k, field, "boolean")
	}
	_, v, _ := s.literal()
	*dst = v
	return nil
}

// ref reads a {"id": …} object; other keys are skipped.
func (s *scanner) ref(text string, dst *string, field, idField string) *decode.FieldError {
	if k := s.peek(); k != kObject && k != kNull {
		return decode.Field(field, "want object, got "+k.String())
	}
	return s.fields(field, func(key []byte) *decode.FieldError {
		if canon(key, refKeys) == "" {
			return s.skipFE()
		}
		return s.num(text, dst, idField)
	})
}

// fill validates the fields and sets the record's id and version and the
// row's values, as timeEntry does for the encoding/json path (kept in the
// tests as the reference). row is the record's, linked by records.
func (e *entryJSON) fill(row []any, rec *clients.Record, b *boxer) *decode.FieldError {
	if fe := e.identity.fill(rec); fe != nil {
		return fe
	}
	if e.spentDate == "" {
		return decode.Missing("spent_date")
	}
	day, ok := parseDay(e.spentDate)
	if !ok {
		return decode.Field("spent_date", fmt.Sprintf("want YYYY-MM-DD, got %q", e.spentDate))
	}
	if !validDecimal(e.hours) {
		return decode.Field("hours", "missing or not a number")
	}
	for i, r := range entryRefs {
		ref := optRef
		if r.required {
			ref = reqRef
		}
		v, fe := ref(e.refs[i], r.field)
		if fe != nil {
			return fe
		}
		// A required id is never "": str boxes it as it is.
		row[r.col] = b.str(v)
	}
	row[schema.TE.SpentDate] = b.day(day)
	row[schema.TE.Hours] = b.dec(e.hours)
	if e.hasNotes {
		row[schema.TE.Notes] = e.notes
	}
	for i, f := range entryFlags {
		row[f.col] = e.flags[i]
	}
	if e.hasApproval {
		row[schema.TE.Approval] = b.str(e.approval)
	}
	if e.extRef != nil {
		row[schema.TE.ExtRef] = json.RawMessage(e.extRef)
	}
	return nil
}

// parseStamp parses an RFC 3339 stamp into UTC; the form Harvest sends
// (2026-01-02T10:00:00Z) without time.Parse, anything else with it.
func parseStamp(v string) (time.Time, bool) {
	if len(v) == 20 && v[4] == '-' && v[7] == '-' && v[10] == 'T' && v[13] == ':' && v[16] == ':' && v[19] == 'Z' {
		y, ok1 := digits(v[0:4])
		mo, ok2 := digits(v[5:7])
		d, ok3 := digits(v[8:10])
		h, ok4 := digits(v[11:13])
		mi, ok5 := digits(v[14:16])
		sec, ok6 := digits(v[17:19])
		if ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && mo >= 1 && mo <= 12 && d >= 1 && d <= daysIn(y, mo) && h < 24 && mi < 60 && sec < 60 {
			return time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC), true
		}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// parseDay parses YYYY-MM-DD as clients.ParseDate does.
func parseDay(v string) (clients.Date, bool) {
	if len(v) == 10 && v[4] == '-' && v[7] == '-' {
		y, ok1 := digits(v[0:4])
		mo, ok2 := digits(v[5:7])
		d, ok3 := digits(v[8:10])
		if ok1 && ok2 && ok3 && mo >= 1 && mo <= 12 && d >= 1 && d <= daysIn(y, mo) {
			return clients.Date{Year: y, Month: time.Month(mo), Day: d}, true
		}
	}
	day, err := clients.ParseDate(v)
	return day, err == nil
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(y, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
