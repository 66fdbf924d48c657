// Package decode owns what every provider's page decoder shares: the field
// error a record's decoding returns, the phrasing of encoding/json errors
// and of JSON kinds, and the decode errors a source reports, built through
// its HTTP client so that they never carry its secrets. Error texts are the
// ones operators and tests already read: "field time_entries[3].hours:
// want string, got number".
package decode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/schema"
)

// FieldError says which field of one record is wrong and how. Field is a
// path inside the record ("" for the record itself).
type FieldError struct{ Field, What string }

func (e *FieldError) Error() string { return e.Field + ": " + e.What }

// Field returns a FieldError; decoders build many, so it stays small.
func Field(field, what string) *FieldError { return &FieldError{Field: field, What: what} }

// Missing is the FieldError of a required field left out or empty.
func Missing(field string) *FieldError { return &FieldError{Field: field, What: "missing"} }

// MaxCount bounds every count a provider sends (totals, page counts, page
// sizes, page and row numbers): far more than any account holds, and small
// enough that nothing sized or multiplied by it can exhaust memory or
// overflow. A count outside 0..MaxCount is bad input for its page.
const MaxCount = 100_000_000

// Count checks a count sent in field: nil when 0 <= n <= MaxCount.
func Count(field string, n int64) *FieldError {
	if n < 0 || n > MaxCount {
		return &FieldError{Field: field, What: fmt.Sprintf("want a count of 0 to %d, got %d", MaxCount, n)}
	}
	return nil
}

// Under puts fe below the object field prefix ("document" + "id" gives
// "document.id").
func Under(prefix string, fe *FieldError) *FieldError {
	return &FieldError{Field: prefix + "." + fe.Field, What: fe.What}
}

// Unmarshal is json.Unmarshal with its error as a FieldError.
func Unmarshal(raw []byte, v any) *FieldError {
	if err := json.Unmarshal(raw, v); err != nil {
		field, what := Describe(err)
		return &FieldError{Field: field, What: what}
	}
	return nil
}

// Describe turns an encoding/json error into a field path and a phrase.
func Describe(err error) (field, what string) {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		if te.Field == "" {
			return "", fmt.Sprintf("want an object, got %s", te.Value)
		}
		// Embedded structs show up in the path by their Go name; the
		// decoders name theirs common*, which no provider's key is.
		parts := strings.Split(te.Field, ".")
		kept := parts[:0]
		for _, p := range parts {
			if !strings.HasPrefix(p, "common") {
				kept = append(kept, p)
			}
		}
		field := strings.Join(kept, ".")
		return field, fmt.Sprintf("want %s, got %s", JSONKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return "", fmt.Sprintf("not JSON (%s at byte %d)", se.Error(), se.Offset)
	}
	return "", err.Error()
}

// JSONKind names, in JSON's words, the Go kind a value was decoded into.
func JSONKind(k string) string {
	switch k {
	case "bool":
		return "boolean"
	case "ptr", "struct", "map":
		return "object"
	case "slice":
		return "array"
	}
	return k // string (json.Number is a string kind: a number)
}

// IDs checks the ids a record names, in order, with a provider's checks
// of a required (Req) and an optional (Opt) id sent as a V. It keeps the
// first error in Err and then checks no more, so that a decoder lists the
// ids it needs and looks at Err once.
type IDs[V any] struct {
	Req, Opt func(v V, field string) (string, *FieldError)
	Err      *FieldError
}

// Need returns the required id v of field ("" after an error).
func (r *IDs[V]) Need(v V, field string) string { return r.check(r.Req, v, field) }

// May returns the optional id v of field ("" when absent or after an
// error).
func (r *IDs[V]) May(v V, field string) string { return r.check(r.Opt, v, field) }

func (r *IDs[V]) check(check func(V, string) (string, *FieldError), v V, field string) string {
	if r.Err != nil {
		return ""
	}
	id, fe := check(v, field)
	r.Err = fe
	return id
}

// Digits reports whether s is what Harvest and Toggl send as an integer
// id: 1 to 19 decimal digits (which may still overflow an int64).
func Digits(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FirstByte is the first byte of b after JSON white space, 0 when none.
func FirstByte(b []byte) byte {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return c
		}
	}
	return 0
}

// KindOf names the kind of the JSON value b starts with, from its first
// byte: for "want an object, got array" without parsing the value.
func KindOf(b []byte) string {
	switch FirstByte(b) {
	case 0:
		return "nothing"
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "number"
}

// Errors builds one source's decode errors. Through the source's HTTP
// client they redact its secrets; without one (decoder tests) they are
// httpx.DecodeError's.
type Errors struct {
	Source string
	errf   func(resource string, page int, field, what string, body []byte) *httpx.Error
}

// NewErrors returns the decode errors of source, redacted by hc when set.
func NewErrors(source string, hc *httpx.Client) Errors {
	if hc != nil {
		return Errors{Source: source, errf: hc.DecodeError}
	}
	return Errors{Source: source}
}

// Errf reports field of page of resource as wrong (what), with an excerpt
// of body.
func (e Errors) Errf(resource string, page int, field, what string, body []byte) *httpx.Error {
	if e.errf == nil {
		return httpx.DecodeError(e.Source, resource, page, field, what, body)
	}
	return e.errf(resource, page, field, what, body)
}

// Page reports a wrong page as a whole: field "" reads "(page)".
func (e Errors) Page(r clients.Resource, page int, field, what string, body []byte) *httpx.Error {
	if field == "" {
		field = "(page)"
	}
	return e.Errf(string(r), page, field, what, body)
}

// Elem reports fe of element i of a page as field "<r>[i].<field>" ("<r>[i]"
// when fe names the element itself), with raw, the element, as excerpt.
func (e Errors) Elem(r clients.Resource, page, i int, fe *FieldError, raw []byte) *httpx.Error {
	field := fmt.Sprintf("%s[%d]", r, i)
	if fe.Field != "" {
		field += "." + fe.Field
	}
	return e.Errf(string(r), page, field, fe.What, raw)
}

// Objects decodes each element of a page (raws, each one JSON object) into
// a J and lets fill set its record and its row of table t. The rows of a
// page share one block of values. The first bad element fails the page.
func Objects[J any](e Errors, r clients.Resource, t *schema.Table, page int, raws []json.RawMessage, recs []clients.Record,
	fetched time.Time, fill func(*J, []any, *clients.Record) *FieldError,
) error {
	w := t.Width()
	rows := make([]any, len(raws)*w)
	for i, raw := range raws {
		if FirstByte(raw) != '{' {
			return e.Elem(r, page, i, Field("", "want an object, got "+KindOf(raw)), raw)
		}
		var j J
		if fe := Unmarshal(raw, &j); fe != nil {
			return e.Elem(r, page, i, fe, raw)
		}
		rec := &recs[i]
		rec.Raw = raw
		rec.FetchedAt = fetched
		rec.Row = rows[i*w : (i+1)*w : (i+1)*w]
		if fe := fill(&j, rec.Row, rec); fe != nil {
			return e.Elem(r, page, i, fe, raw)
		}
	}
	return nil
}
