package harvest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/provider/decode"
	"github.com/tidemarkhq/tidemark/schema"
)

// declared reads a resource's records from its declaration alone: each
// typed column's Path (Harvest is the schema's reference dialect) says
// where its value is, a child table's array is checked line by line (its
// rows are derived from the stored raw by upsert), and the parent column
// is filled from the listing. A resource added to the schema is read
// without a line of decoding code of its own.
type declared struct {
	table *schema.Table
	root  *pathNode
}

// pathNode is one level of the record's keys: a column's value, an object
// holding deeper columns, or a child's array.
type pathNode struct {
	col   int // column position; -1 when the key only leads deeper
	c     schema.Column
	sub   map[string]*pathNode
	child *declaredChild
}

type declaredChild struct {
	def  *schema.Child
	root *pathNode
}

func newPathNode() *pathNode { return &pathNode{col: -1, sub: map[string]*pathNode{}} }

// compile builds the key tree of cols; paths that are not plain keys ("(the
// user listed)") are filled by the listing, not read.
func compile(cols []schema.Column) *pathNode {
	root := newPathNode()
	for i, c := range cols {
		if strings.HasPrefix(c.Path, "(") || c.Path == "" {
			continue
		}
		n := root
		for _, k := range strings.Split(c.Path, ".") {
			next, ok := n.sub[k]
			if !ok {
				next = newPathNode()
				n.sub[k] = next
			}
			n = next
		}
		n.col, n.c = i, c
	}
	return root
}

func newDeclared(t *schema.Table) *declared {
	d := &declared{table: t, root: compile(t.Columns)}
	for _, c := range t.Children {
		d.root.sub[c.Path] = &pathNode{col: -1, child: &declaredChild{def: c, root: compile(c.Columns)}}
	}
	// The stamps every record has are read by identity.
	return d
}

// readRecord reads one record at the cursor into rec and row.
func (d *declared) readRecord(s *scanner, text string, rec *clients.Record, row []any, parent string) *decode.FieldError {
	var f identity
	seen := make([]bool, len(row))
	if fe := readObject(s, text, d.root, "", row, seen, func(key string) (bool, *decode.FieldError) {
		return f.read(s, text, key)
	}); fe != nil {
		return fe
	}
	if d.table.Singleton {
		f.id, f.updatedAt = "0", "2000-01-01T00:00:00Z" // replaced by the listing
	}
	if fe := f.fill(rec); fe != nil {
		return fe
	}
	if d.table.ParentColumn != "" {
		i := d.table.Index(d.table.ParentColumn)
		row[i], seen[i] = parent, true
	}
	return required(d.table.Columns, row, seen, "")
}

// required refuses a NOT NULL column the record left out or sent null.
func required(cols []schema.Column, row []any, seen []bool, prefix string) *decode.FieldError {
	for i, c := range cols {
		if !c.Nullable && (!seen[i] || row[i] == nil) {
			return decode.Missing(prefix + c.Path)
		}
	}
	return nil
}

// readObject reads the object at the cursor, filling the columns node
// names; extra, when set, gets the keys node does not name first.
func readObject(s *scanner, text string, node *pathNode, prefix string, row []any, seen []bool, extra func(string) (bool, *decode.FieldError)) *decode.FieldError {
	return s.fields(strings.TrimSuffix(prefix, "."), func(key []byte) *decode.FieldError {
		if extra != nil {
			if took, fe := extra(string(key)); took || fe != nil {
				return fe
			}
		}
		n, ok := node.sub[string(key)]
		switch {
		case !ok:
			return s.skipFE()
		case n.child != nil:
			return readLines(s, text, n.child, prefix+string(key))
		case n.col >= 0:
			return readValue(s, text, n, prefix+string(key), row, seen)
		}
		return readObject(s, text, n, prefix+string(key)+".", row, seen, nil)
	})
}

// readValue reads the value at the cursor into n's column, by its
// declared type; null is NULL (a NOT NULL column then fails in required).
func readValue(s *scanner, text string, n *pathNode, field string, row []any, seen []bool) *decode.FieldError {
	seen[n.col] = true
	k := s.peek()
	if k == kNull {
		_, _, _ = s.literal()
		row[n.col] = nil
		return nil
	}
	want := func(what string) *decode.FieldError {
		return decode.Field(field, "want "+what+", got "+k.String())
	}
	switch n.c.Type {
	case schema.Text:
		var v string
		switch k {
		case kString:
			t, err := s.text(text)
			if err != nil {
				return syntaxFE
			}
			v = strings.Clone(t)
		case kNumber: // ids
			if fe := s.num(text, &v, field); fe != nil {
				return fe
			}
			if _, ok := id(v); !ok {
				return decode.Field(field, fmt.Sprintf("want an integer id, got %s", v))
			}
			v = strings.Clone(v)
		default:
			return want("string")
		}
		row[n.col] = v
		if v == "" && n.c.EmptyIsNull {
			row[n.col] = nil
		}
	case schema.Numeric:
		var v string
		if k != kNumber && k != kString {
			return want("number")
		}
		if fe := s.num(text, &v, field); fe != nil {
			return fe
		}
		row[n.col] = clients.Decimal(strings.Clone(v))
	case schema.Bigint:
		var v string
		if k != kNumber {
			return want("number")
		}
		if fe := s.num(text, &v, field); fe != nil {
			return fe
		}
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return decode.Field(field, fmt.Sprintf("want an integer, got %s", v))
		}
		row[n.col] = i
	case schema.Boolean:
		var v bool
		if fe := s.boolean(&v, field); fe != nil {
			return fe
		}
		row[n.col] = v
	case schema.Date, schema.Timestamptz:
		var v string
		if fe := s.strField(text, &v, field); fe != nil {
			return fe
		}
		if n.c.Type == schema.Date {
			d, ok := parseDay(v)
			if !ok {
				return decode.Field(field, fmt.Sprintf("want a date (YYYY-MM-DD), got %q", v))
			}
			row[n.col] = d
		} else {
			t, ok := parseStamp(v)
			if !ok {
				return decode.Field(field, fmt.Sprintf("want RFC 3339, got %q", v))
			}
			row[n.col] = t
		}
	case schema.JSONB:
		lo := s.i
		if s.skip() != nil {
			return syntaxFE
		}
		row[n.col] = json.RawMessage(s.b[lo:s.i:s.i])
	}
	return nil
}

// readLines checks a child's array: every line an object with an integer
// id and its NOT NULL columns, each value of its declared type.
func readLines(s *scanner, text string, c *declaredChild, field string) *decode.FieldError {
	return s.items(field, func(i int) *decode.FieldError {
		at := fmt.Sprintf("%s[%d].", field, i)
		row := make([]any, len(c.def.Columns))
		seen := make([]bool, len(row))
		var lineID string
		fe := readObject(s, text, c.root, at, row, seen, func(key string) (bool, *decode.FieldError) {
			if key == "id" {
				return true, s.num(text, &lineID, at+"id")
			}
			return false, nil
		})
		if fe != nil {
			return fe
		}
		if _, ok := id(lineID); !ok {
			return decode.Field(at+"id", fmt.Sprintf("want an integer id, got %q", lineID))
		}
		return required(c.def.Columns, row, seen, at)
	})
}
