package harvest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// scanner is a single-pass JSON reader over one response body. It validates
// what it reads (and everything it skips) with the grammar encoding/json
// uses, and never copies: values come back as offsets into the body, so a
// record's Raw is the exact slice of the body it was read from.
//
// encoding/json spent ~36 µs and ~18 allocations per time entry on the
// generic reflection path; see BENCHMARKS.md.
type scanner struct {
	b     []byte
	i     int
	depth int
}

// errSyntax means the body is not valid JSON; the caller asks encoding/json
// for the exact message, so that it reads as before.
var errSyntax = errors.New("syntax error")

// maxDepth matches encoding/json's nesting limit.
const maxDepth = 10000

// kind names a JSON value's kind as encoding/json's type errors do.
type kind uint8

const (
	kNone kind = iota
	kString
	kNumber
	kBool
	kNull
	kArray
	kObject
)

func (k kind) String() string {
	switch k {
	case kString:
		return "string"
	case kNumber:
		return "number"
	case kBool:
		return "bool"
	case kNull:
		return "null"
	case kArray:
		return "array"
	case kObject:
		return "object"
	}
	return "nothing"
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the kind of the value at the cursor (after whitespace).
func (s *scanner) peek() kind {
	s.ws()
	if s.i >= len(s.b) {
		return kNone
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return kString
	case c == '{':
		return kObject
	case c == '[':
		return kArray
	case c == 't' || c == 'f':
		return kBool
	case c == 'n':
		return kNull
	case c == '-' || (c >= '0' && c <= '9'):
		return kNumber
	}
	return kNone
}

// str reads a string at the cursor and returns its contents without the
// quotes; plain reports that it holds no escape and only ASCII, so that its
// bytes are its value.
func (s *scanner) str() (lo, hi int, plain bool, err error) {
	b := s.b
	i := s.i + 1 // past the quote
	lo, plain = i, true
	for {
		// The common run: printable ASCII without quote or backslash.
		for i < len(b) && plainByte[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, 0, false, errSyntax
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return lo, i, plain, nil
		case c == '\\':
			plain = false
			if i+1 >= len(b) {
				return 0, 0, false, errSyntax
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, 0, false, errSyntax
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return 0, 0, false, errSyntax
					}
				}
				i += 6
			default:
				return 0, 0, false, errSyntax
			}
		case c < 0x20:
			return 0, 0, false, errSyntax
		default: // non-ASCII: encoding/json replaces invalid UTF-8, it is not an error
			plain = false
			i++
		}
	}
}

// plainByte marks the bytes a string holds as they are: printable ASCII
// but the quote and the backslash.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number reads a number literal at the cursor.
func (s *scanner) number() (lo, hi int, err error) {
	b, i := s.b, s.i
	lo = i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return 0, 0, errSyntax
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, 0, errSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return 0, 0, errSyntax
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	s.i = i
	return lo, i, nil
}

// literal reads true, false or null at the cursor.
func (s *scanner) literal() (kind, bool, error) {
	b := s.b[s.i:]
	switch {
	case len(b) >= 4 && string(b[:4]) == "true":
		s.i += 4
		return kBool, true, nil
	case len(b) >= 5 && string(b[:5]) == "false":
		s.i += 5
		return kBool, false, nil
	case len(b) >= 4 && string(b[:4]) == "null":
		s.i += 4
		return kNull, false, nil
	}
	return kNone, false, errSyntax
}

// skip reads and validates any value at the cursor.
func (s *scanner) skip() error {
	switch s.peek() {
	case kString:
		_, _, _, err := s.str()
		return err
	case kNumber:
		_, _, err := s.number()
		return err
	case kBool, kNull:
		_, _, err := s.literal()
		return err
	case kObject:
		return s.object(func([]byte) error { return s.skip() })
	case kArray:
		return s.array(func(int) error { return s.skip() })
	}
	return errSyntax
}

// object reads an object at the cursor, calling field with each key (its
// decoded text) while the cursor is on the value; field must read the value.
func (s *scanner) object(field func(key []byte) error) error {
	if more, err := s.enter('}'); !more {
		return err
	}
	for {
		if s.peek() != kString {
			return errSyntax
		}
		lo, hi, plain, err := s.str()
		if err != nil {
			return err
		}
		key := s.b[lo:hi]
		if !plain {
			key = unquote(s.b[lo-1 : hi+1])
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return errSyntax
		}
		s.i++
		if err := field(key); err != nil {
			return err
		}
		if more, err := s.next('}'); !more {
			return err
		}
	}
}

// array reads an array at the cursor, calling elem with each index while
// the cursor is on the element; elem must read it.
func (s *scanner) array(elem func(i int) error) error {
	if more, err := s.enter(']'); !more {
		return err
	}
	for n := 0; ; n++ {
		if err := elem(n); err != nil {
			return err
		}
		if more, err := s.next(']'); !more {
			return err
		}
	}
}

// enter steps into the object or array at the cursor, which close ends.
// It reports whether a member follows: an empty one has been left already.
func (s *scanner) enter(close byte) (bool, error) {
	if s.depth++; s.depth > maxDepth {
		return false, errSyntax
	}
	s.i++ // { or [
	s.ws()
	return !s.leave(close), nil
}

// next reads what follows a member or element: true when a comma says
// another follows, false when close ended the container.
func (s *scanner) next(close byte) (bool, error) {
	s.ws()
	switch {
	case s.leave(close):
		return false, nil
	case s.i < len(s.b) && s.b[s.i] == ',':
		s.i++
		return true, nil
	}
	return false, errSyntax
}

// leave steps out of the container when the cursor is on its close.
func (s *scanner) leave(close byte) bool {
	if s.i < len(s.b) && s.b[s.i] == close {
		s.i++
		s.depth--
		return true
	}
	return false
}

// fields reads the object at the cursor as a record's fields: null reads as
// nothing, another kind is an error naming field ("" for the record
// itself), and read is called with each key while the cursor is on its
// value. read must read (or skipFE) the value, and returns the first
// wrong-typed field's error, which ends the walk.
func (s *scanner) fields(field string, read func(key []byte) *decode.FieldError) *decode.FieldError {
	return s.walk(field, kObject, func(key []byte, _ int) *decode.FieldError { return read(key) })
}

// items reads the array at the cursor as fields reads an object, calling
// read with each index.
func (s *scanner) items(field string, read func(i int) *decode.FieldError) *decode.FieldError {
	return s.walk(field, kArray, func(_ []byte, i int) *decode.FieldError { return read(i) })
}

func (s *scanner) walk(field string, want kind, read func(key []byte, i int) *decode.FieldError) *decode.FieldError {
	switch k := s.peek(); {
	case k == kNull:
		_, _, _ = s.literal()
		return nil
	case k != want:
		return decode.Field(field, "want an "+want.String()+", got "+k.String())
	}
	var fe *decode.FieldError
	stop := func(e *decode.FieldError) error {
		if fe = e; fe != nil {
			return errStop
		}
		return nil
	}
	var err error
	if want == kObject {
		err = s.object(func(key []byte) error { return stop(read(key, 0)) })
	} else {
		err = s.array(func(i int) error { return stop(read(nil, i)) })
	}
	switch {
	case fe != nil:
		return fe
	case err != nil:
		return syntaxFE
	}
	return nil
}

// skipFE skips the value at the cursor for fields: a syntax error ends the
// walk.
func (s *scanner) skipFE() *decode.FieldError {
	if s.skip() != nil {
		return syntaxFE
	}
	return nil
}

// unquote decodes a quoted JSON string (escapes, UTF-16 surrogates, invalid
// UTF-8) exactly as encoding/json does. It is the rare path: most strings
// are plain.
func unquote(q []byte) []byte {
	var out string
	if err := json.Unmarshal(q, &out); err != nil {
		return nil
	}
	return []byte(out)
}

// stringValue returns a string value's text, decoding escapes.
func (s *scanner) stringValue() (string, error) {
	lo, hi, plain, err := s.str()
	if err != nil {
		return "", err
	}
	if plain {
		return string(s.b[lo:hi]), nil
	}
	var out string
	if err := json.Unmarshal(s.b[lo-1:hi+1], &out); err != nil {
		return "", errSyntax
	}
	return out, nil
}

// elemSink decodes records during the envelope scan. elem reads the
// element at the cursor (which starts at lo) and reports whether it took it;
// reset starts a new array (a key given twice: the last one wins).
type elemSink interface {
	reset()
	elem(s *scanner, i, lo int) bool
}

// span is a value's bytes in the body.
type span struct{ lo, hi int }

// envelope is what a list response holds besides its records.
type envelope struct {
	elems []span // the resource's records
	found bool   // the resource's array was there (and not null)
	links bool   // links was an object
	next  string // links.next, "" when null
	// totalEntries, totalPages and perPage are the envelope's counts, -1
	// when absent or not a number. A number that is not a whole count in
	// 0..decode.MaxCount is bad input (typeErr): it would size the page
	// walk's memory.
	totalEntries, totalPages, perPage int
	// typeErr is the first value of the wrong type, in document order, as
	// encoding/json would report it (it still checks the whole body first).
	typeErr *decode.FieldError
}

var nextKeys = []string{"next"}

// scanEnvelope reads a list response: the array named after r (only when r
// is a known resource), links.next, and validates the rest.
// When sink is set, each record is handed to it where it stands (one pass);
// a record it does not take is skipped (validated only).
func scanEnvelope(body []byte, r clients.Resource, sink elemSink) (envelope, error) {
	env := envelope{totalEntries: -1, totalPages: -1, perPage: -1}
	key := string(r)
	if _, ok := schema.Lookup(r); !ok {
		key = "" // never matches: an unknown resource has no array
	}
	names := []string{key, "links", "total_entries", "total_pages", "per_page"}
	typeErr := func(field string, want string, got kind) {
		if env.typeErr == nil {
			env.typeErr = decode.Field(field, fmt.Sprintf("want %s, got %s", want, got))
		}
	}
	s := scanner{b: body}
	switch k := s.peek(); k {
	case kObject:
		err := s.object(func(k []byte) error {
			switch name := canon(k, names); {
			case key != "" && name == key:
				switch vk := s.peek(); vk {
				case kNull:
					env.found, env.elems = false, nil
					_, _, err := s.literal()
					return err
				case kArray:
					env.found, env.elems = true, env.elems[:0]
					if sink != nil {
						sink.reset()
					}
					return s.array(func(i int) error {
						lo, depth := s.i, s.depth
						if sink == nil || !sink.elem(&s, i, lo) {
							s.i, s.depth = lo, depth
							if err := s.skip(); err != nil {
								return err
							}
						}
						env.elems = append(env.elems, span{lo, s.i})
						return nil
					})
				default:
					typeErr(key, "array", vk)
					return s.skip()
				}
			case name == "links":
				switch vk := s.peek(); vk {
				case kNull:
					env.links = false
					_, _, err := s.literal()
					return err
				case kObject:
					env.links = true
					return s.object(func(k []byte) error {
						if canon(k, nextKeys) == "" {
							return s.skip()
						}
						switch vk := s.peek(); vk {
						case kNull:
							env.next = ""
							_, _, err := s.literal()
							return err
						case kString:
							v, err := s.stringValue()
							env.next = v
							return err
						default:
							typeErr("links.next", "string", vk)
							return s.skip()
						}
					})
				default:
					typeErr("links", "object", vk)
					return s.skip()
				}
			case name == "total_entries":
				return s.count(&env.totalEntries, "total_entries", &env.typeErr)
			case name == "total_pages":
				return s.count(&env.totalPages, "total_pages", &env.typeErr)
			case name == "per_page":
				return s.count(&env.perPage, "per_page", &env.typeErr)
			}
			return s.skip()
		})
		if err != nil {
			return env, err
		}
	case kNull:
		if _, _, err := s.literal(); err != nil {
			return env, err
		}
	default:
		if err := s.skip(); err != nil {
			return env, err
		}
		env.typeErr = decode.Field("", fmt.Sprintf("want an object, got %s", k))
	}
	s.ws()
	if s.i != len(body) {
		return env, errSyntax
	}
	return env, nil
}

// count reads a count into dst; a value that is not a number leaves -1
// (skipped, still validated). A number that is not a whole count in
// 0..decode.MaxCount leaves -1 and sets *bad (when not set yet) naming
// field.
func (s *scanner) count(dst *int, field string, bad **decode.FieldError) error {
	*dst = -1
	if s.peek() != kNumber {
		return s.skip()
	}
	lo, hi, err := s.number()
	if err != nil {
		return err
	}
	text := string(s.b[lo:hi])
	n, err := strconv.ParseInt(text, 10, 64)
	fe := decode.Count(field, n)
	if err != nil {
		fe = decode.Field(field, fmt.Sprintf("want a count of 0 to %d, got %.40s", decode.MaxCount, text))
	}
	if fe != nil {
		if *bad == nil {
			*bad = fe
		}
		return nil
	}
	*dst = int(n)
	return nil
}
