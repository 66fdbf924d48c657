package harvest

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// refFields holds the fields of projects, clients, users and tasks as read
// from the body ("" when absent or null).
type refFields struct {
	identity
	name, code, currency, firstName, lastName, email string
	client                                           string // project's client id
	isActive, isBillable                             bool
}

// refResource is how one of the small resources is read: the keys it
// reads (others are skipped, as encoding/json skips keys its struct does not
// name) and how they fill a row of its table.
type refResource struct {
	table *schema.Table
	keys  []string
	set   func(f *refFields, row []any) *decode.FieldError
}

var refResources = map[clients.Resource]refResource{
	clients.Projects: {schema.Projects, []string{"id", "updated_at", "created_at", "name", "code", "client", "is_active", "is_billable"}, setProject},
	clients.Clients:  {schema.Clients, []string{"id", "updated_at", "created_at", "name", "currency", "is_active"}, setClient},
	clients.Users:    {schema.Users, []string{"id", "updated_at", "created_at", "first_name", "last_name", "email", "is_active"}, setUser},
	clients.Tasks:    {schema.Tasks, []string{"id", "updated_at", "created_at", "name", "is_active"}, setTask},
}

func (f *refFields) read(s *scanner, text string, keys []string) *decode.FieldError {
	var set bool // presence of a nullable text; null leaves ""
	return s.record(text, keys, &f.identity, func(k string) *decode.FieldError {
		switch k {
		case "name":
			return s.strField(text, &f.name, "name")
		case "first_name":
			return s.strField(text, &f.firstName, "first_name")
		case "last_name":
			return s.strField(text, &f.lastName, "last_name")
		case "code":
			return s.optStr(text, &f.code, &set, "code")
		case "currency":
			return s.optStr(text, &f.currency, &set, "currency")
		case "email":
			return s.optStr(text, &f.email, &set, "email")
		case "client":
			return s.ref(text, &f.client, "client", "client.id")
		case "is_active":
			return s.boolean(&f.isActive, "is_active")
		case "is_billable":
			return s.boolean(&f.isBillable, "is_billable")
		}
		return s.skipFE()
	})
}

// identity holds what every Harvest record has, as read from the body
// ("" when absent or null).
type identity struct{ id, updatedAt, createdAt string }

// read reads the value at the cursor when key is one of the identity's;
// took says whether it was.
func (d *identity) read(s *scanner, text, key string) (took bool, fe *decode.FieldError) {
	switch key {
	case "id":
		return true, s.num(text, &d.id, "id")
	case "updated_at":
		return true, s.strField(text, &d.updatedAt, "updated_at")
	case "created_at":
		return true, s.strField(text, &d.createdAt, "created_at")
	}
	return false, nil
}

// record reads the object at the cursor as a record: its identity, and
// its other keys (canonical among keys, "" for none) through read.
func (s *scanner) record(text string, keys []string, d *identity, read func(key string) *decode.FieldError) *decode.FieldError {
	return s.fields("", func(key []byte) *decode.FieldError {
		k := canon(key, keys)
		if took, fe := d.read(s, text, k); took {
			return fe
		}
		return read(k)
	})
}

// fill sets a record's id, version (updated_at) and created_at, checking
// the first two as every resource needs.
func (d *identity) fill(rec *clients.Record) *decode.FieldError {
	s, ok := id(d.id)
	if !ok {
		if d.id == "" {
			return decode.Missing("id")
		}
		return decode.Field("id", fmt.Sprintf("want an integer id, got %q", d.id))
	}
	rec.ID = strings.Clone(s)
	if d.updatedAt == "" {
		return decode.Missing("updated_at")
	}
	v, ok := parseStamp(d.updatedAt)
	if !ok {
		return decode.Field("updated_at", fmt.Sprintf("want RFC 3339, got %q", d.updatedAt))
	}
	rec.Version = v
	// Only for page walks: a stamp that does not parse is no error.
	rec.CreatedAt, _ = parseStamp(d.createdAt)
	return nil
}

// recordReader reads one record at the scanner's cursor into rec and its
// row (parent: the id of the record a nested listing is under).
type recordReader interface {
	readRecord(s *scanner, text string, rec *clients.Record, row []any, parent string) *decode.FieldError
}

func (rr refResource) readRecord(s *scanner, text string, rec *clients.Record, row []any, _ string) *decode.FieldError {
	var f refFields
	if fe := f.read(s, text, rr.keys); fe != nil {
		return fe
	}
	if fe := f.fill(rec); fe != nil {
		return fe
	}
	return rr.set(&f, row)
}

// refSink decodes the records of every resource but time entries during
// the envelope scan, like entrySink.
type refSink struct {
	reader  recordReader
	width   int
	parent  string
	body    []byte
	text    string
	fetched time.Time
	recs    []clients.Record
	rows    []any // width values per record
	err     *decode.FieldError
	errAt   int
}

// bodyText is body as a string without a copy: the strings decoded from
// a page share its bytes, as the records' Raw does already (a page is read
// into its own buffer and never written again). Copied, it was an idle
// daemon's largest allocation.
func bodyText(body []byte) string { return unsafe.String(unsafe.SliceData(body), len(body)) }

func newRefSink(rr recordReader, width int, parent string, body []byte, fetched time.Time) *refSink {
	// Sized for the page up front (Harvest's reference records are
	// 0.2–1 kB): grown by append from nothing, the records and their rows
	// cost twice their size in garbage on every pass.
	n := len(body)/400 + 1
	return &refSink{reader: rr, width: width, parent: parent, body: body, text: bodyText(body), fetched: fetched,
		recs: make([]clients.Record, 0, n), rows: make([]any, 0, n*width)}
}

func (k *refSink) reset() { k.recs, k.rows, k.err = k.recs[:0], k.rows[:0], nil }

// elem reads one record; a bad one is not taken, so that the envelope scan
// skips (and validates) it from its start.
func (k *refSink) elem(s *scanner, i, lo int) bool {
	if k.err != nil {
		return false
	}
	w := k.width
	k.recs = append(k.recs, clients.Record{FetchedAt: k.fetched})
	k.rows = append(k.rows, make([]any, w)...)
	if fe := k.reader.readRecord(s, k.text, &k.recs[i], k.rows[i*w:(i+1)*w], k.parent); fe != nil {
		k.err, k.errAt = fe, i
		return false
	}
	k.recs[i].Raw = k.body[lo:s.i:s.i]
	return true
}

func (k *refSink) failed() (*decode.FieldError, int) { return k.err, k.errAt }

func (k *refSink) records() []clients.Record {
	w := k.width
	for i := range k.recs {
		k.recs[i].Row = k.rows[i*w : (i+1)*w : (i+1)*w]
	}
	return k.recs
}

func setProject(f *refFields, row []any) *decode.FieldError {
	client, fe := optRef(f.client, "client.id")
	if fe != nil {
		return fe
	}
	row[schema.PR.Name], row[schema.PR.Code], row[schema.PR.Client] = f.name, schema.OrNull(f.code), schema.OrNull(client)
	row[schema.PR.Active], row[schema.PR.Billable] = f.isActive, f.isBillable
	return nil
}

func setClient(f *refFields, row []any) *decode.FieldError {
	row[schema.CL.Name], row[schema.CL.Currency], row[schema.CL.Active] = f.name, schema.OrNull(f.currency), f.isActive
	return nil
}

func setUser(f *refFields, row []any) *decode.FieldError {
	row[schema.US.First], row[schema.US.Last], row[schema.US.Email] = schema.OrNull(f.firstName), schema.OrNull(f.lastName), schema.OrNull(f.email)
	row[schema.US.Active] = f.isActive
	return nil
}

func setTask(f *refFields, row []any) *decode.FieldError {
	row[schema.TA.Name], row[schema.TA.Active] = f.name, f.isActive
	return nil
}

// pageSink is an elemSink that also hands over its records or its error.
type pageSink interface {
	elemSink
	failed() (*decode.FieldError, int)
	records() []clients.Record
}

func (k *entrySink) failed() (*decode.FieldError, int) { return k.err, k.errAt }

// sinkFor returns the decoder of r's records, nil for a resource Harvest
// does not serve. Time entries and the first four resources have their own
// readers (the hot path, and error texts operators know); every other
// resource is read from its declaration.
func sinkFor(r clients.Resource, parent string, body []byte, fetched time.Time) pageSink {
	if r == clients.TimeEntries {
		return newEntrySink(body, fetched)
	}
	if rr, ok := refResources[r]; ok {
		return newRefSink(rr, rr.table.Width(), parent, body, fetched)
	}
	if d, ok := declaredReaders[r]; ok {
		return newRefSink(d, d.table.Width(), parent, body, fetched)
	}
	return nil
}
