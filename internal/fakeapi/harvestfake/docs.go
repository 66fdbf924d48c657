package harvestfake

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/schema"
)

// Doc is a stored record of a resource served from its declaration (every
// resource in harvest.Endpoints): its typed values by column name, rendered
// at each column's Path in Harvest's shapes (an id path as a number), its
// lines for a table with children, and the record it is listed under.
type Doc struct {
	ID int64
	// Parent is the record a nested resource is listed under (an invoice's
	// id for a payment, a user's for a rate); 0 for a top-level one.
	Parent int64
	Values schema.Values
	// Lines are the child lines (line_items), each with its id.
	Lines     []Line
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Line is one child line of a Doc.
type Line struct {
	ID     int64
	Values schema.Values
}

// PutDoc inserts or replaces a record of r, a resource in harvest.Endpoints
// (stamps as for PutTimeEntry). A nested record moves its parent's
// updated_at to its own, as Harvest does when a payment, a message or a
// rate changes what the parent shows (an inference, APIS.md): the parent
// must exist.
func (s *Server) PutDoc(r clients.Resource, d Doc) { s.put(r, d) }

// docTables are the declared resources' tables.
func docTables() map[clients.Resource]records {
	m := map[clients.Resource]records{}
	for r := range harvest.Endpoints {
		def, _ := schema.Lookup(r)
		t := newTable(func(d *Doc) (int64, *time.Time, *time.Time) { return d.ID, &d.CreatedAt, &d.UpdatedAt },
			func(s *Server, b []byte, d *Doc, o renderOpts) []byte { return appendDoc(b, def, d, o) })
		m[r] = t
	}
	return m
}

// appendDoc renders d as Harvest would: id first, the declared columns at
// their paths (nested objects grouped in declaration order), the lines,
// the stamps. The company has no id and no stamps.
func appendDoc(b []byte, def *schema.Table, d *Doc, o renderOpts) []byte {
	b = append(b, '{')
	if !def.Singleton {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, d.ID, 10)
	}
	b = appendValues(b, def.Columns, d.Values, !def.Singleton)
	for _, c := range def.Children {
		b = append(appendKey(b, c.Path), '[')
		for i, l := range d.Lines {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, l.ID, 10)
			b = appendValues(b, c.Columns, l.Values, true)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if !def.Singleton {
		b = appendStamps(b, d.CreatedAt, d.UpdatedAt, o)
	}
	return append(b, '}')
}

// appendValues renders the columns with a plain path; comma says whether
// the object already holds a key.
func appendValues(b []byte, cols []schema.Column, vs schema.Values, comma bool) []byte {
	done := map[string]bool{}
	for _, c := range cols {
		if strings.HasPrefix(c.Path, "(") || c.Path == "" {
			continue
		}
		head, _, nested := strings.Cut(c.Path, ".")
		if done[head] {
			continue
		}
		done[head] = true
		if comma {
			b = append(b, ',')
		}
		comma = true
		b = append(appendString(b, head), ':')
		if !nested {
			b = appendValue(b, vs[c.Name], false)
			continue
		}
		// An object of the columns under head: {"id":…} (null when all are).
		var sub []schema.Column
		subVals := schema.Values{}
		allNull := true
		for _, cc := range cols {
			if h, r, ok := strings.Cut(cc.Path, "."); ok && h == head {
				sub = append(sub, schema.Column{Name: cc.Name, Path: r})
				subVals[cc.Name] = vs[cc.Name]
				if v, ok := vs[cc.Name]; ok && v != nil && v != "" {
					allNull = false
				}
			}
		}
		if allNull {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		b = appendValuesID(b, sub, subVals)
		b = append(b, '}')
	}
	return b
}

// appendValuesID renders one nested object's keys; an "id" key is a
// number, as Harvest's ids are.
func appendValuesID(b []byte, cols []schema.Column, vs schema.Values) []byte {
	for i, c := range cols {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, c.Path), ':')
		b = appendValue(b, vs[c.Name], c.Path == "id")
	}
	return b
}

func appendValue(b []byte, v any, isID bool) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		if isID && x != "" {
			return append(b, x...)
		}
		if isID {
			return append(b, "null"...)
		}
		return appendString(b, x)
	case clients.Decimal:
		return append(b, x...)
	case bool:
		return strconv.AppendBool(b, x)
	case int64:
		return strconv.AppendInt(b, x, 10)
	case clients.Date:
		b = append(b, '"')
		b = append(b, x.String()...)
		return append(b, '"')
	case time.Time:
		return appendTime(b, x)
	case json.RawMessage:
		return append(b, x...)
	}
	return append(b, "null"...)
}

// Sample returns the values of a plausible record of t: content in its
// content column, every other NOT NULL column a value of its type (ids
// "9"), nullable ones left out. For tests and the simulated tracker.
func Sample(t *schema.Table, content string, contentCol string, day clients.Date) schema.Values {
	vs := schema.Values{}
	for _, c := range t.Columns {
		if c.Nullable || c.Name == t.ParentColumn {
			continue
		}
		vs[c.Name] = sampleValue(c, day)
	}
	if contentCol != "" {
		if c, ok := t.Column(contentCol); ok && c.Type == schema.Numeric {
			vs[contentCol] = clients.Decimal(content)
		} else {
			vs[contentCol] = content
		}
	}
	return vs
}

// SampleLine returns a plausible child line.
func SampleLine(c *schema.Child, day clients.Date) schema.Values {
	vs := schema.Values{}
	for _, col := range c.Columns {
		if !col.Nullable {
			vs[col.Name] = sampleValue(col, day)
		}
	}
	return vs
}

func sampleValue(c schema.Column, day clients.Date) any {
	switch c.Type {
	case schema.Text:
		if strings.HasSuffix(c.Path, "id") {
			return "9"
		}
		return "x"
	case schema.Numeric:
		return clients.Decimal("1.5")
	case schema.Boolean:
		return false
	case schema.Bigint:
		return int64(1)
	case schema.Date:
		return day
	case schema.Timestamptz:
		return time.Date(day.Year, day.Month, day.Day, 12, 0, 0, 0, time.UTC)
	case schema.JSONB:
		return json.RawMessage(`[]`)
	}
	return nil
}
