package upsert

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"unicode/utf8"
)

// ContentHash returns the SHA-256 of raw in canonical JSON form: object keys
// sorted (by their decoded text; for a key given twice the last one wins, as
// in jsonb), no insignificant whitespace, numbers and strings exactly as given.
// The same content in another key order or spacing hashes the same. raw must
// be one valid JSON value in valid UTF-8.
func ContentHash(raw []byte) ([32]byte, error) {
	cz := canonPool.Get().(*canonicalizer)
	defer canonPool.Put(cz)
	out, _, err := cz.canonical(raw)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(out), nil
}

// canonical returns the canonical form that ContentHash hashes.
func canonical(raw []byte) ([]byte, error) {
	cz := canonPool.Get().(*canonicalizer)
	defer canonPool.Put(cz)
	out, _, err := cz.canonical(raw)
	if err != nil {
		return nil, err
	}
	return slices.Clone(out), nil
}

// jsonFlags report what a valid JSON text holds that jsonb refuses or that
// Apply requires.
type jsonFlags struct {
	object       bool // the top-level value is an object
	nulEscape    bool // a \u0000 escape (jsonb cannot store it)
	badSurrogate bool // a \uD800-\uDFFF escape not in a valid pair (jsonb refuses)
}

// maxDepth bounds nesting so that hostile input cannot exhaust the stack.
const maxDepth = 512

var canonPool = sync.Pool{New: func() any { return new(canonicalizer) }}

type member struct {
	sortKey    []byte // the key's text: a view of the input unless it has escapes
	k0, k1     int32  // the key as given, quotes included: src[k0:k1]
	start, end int32  // the canonical value: scratch[start:end]
}

// canonicalizer holds reusable buffers; one per goroutine at a time.
type canonicalizer struct {
	src     []byte
	pos     int
	out     []byte
	scratch [][]byte   // per depth: member values of the object being built
	members [][]member // per depth
	flags   jsonFlags
}

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

func (c *canonicalizer) canonical(src []byte) ([]byte, jsonFlags, error) {
	if len(src) > math.MaxInt32 {
		return nil, jsonFlags{}, errors.New("JSON text larger than 2 GiB")
	}
	c.src, c.pos, c.out, c.flags = src, 0, c.out[:0], jsonFlags{}
	defer func() { c.src = nil }()
	c.skipWS()
	if c.pos < len(src) && src[c.pos] == '{' {
		c.flags.object = true
	}
	var err error
	c.out, err = c.value(c.out, 0)
	if err != nil {
		return nil, c.flags, err
	}
	c.skipWS()
	if c.pos != len(src) {
		return nil, c.flags, c.errf("data after the JSON value")
	}
	return c.out, c.flags, nil
}

func (c *canonicalizer) errf(format string, a ...any) error {
	return &syntaxError{off: c.pos, msg: fmt.Sprintf(format, a...)}
}

func (c *canonicalizer) skipWS() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(dst []byte, depth int) ([]byte, error) {
	c.skipWS()
	if c.pos >= len(c.src) {
		return dst, c.errf("unexpected end of input")
	}
	if depth >= maxDepth {
		return dst, c.errf("nesting deeper than %d", maxDepth)
	}
	switch ch := c.src[c.pos]; {
	case ch == '{':
		return c.object(dst, depth)
	case ch == '[':
		return c.array(dst, depth)
	case ch == '"':
		start := c.pos
		if _, err := c.str(); err != nil {
			return dst, err
		}
		return append(dst, c.src[start:c.pos]...), nil
	case ch == '-' || (ch >= '0' && ch <= '9'):
		start := c.pos
		if err := c.number(); err != nil {
			return dst, err
		}
		return append(dst, c.src[start:c.pos]...), nil
	case ch == 't':
		return c.literal(dst, "true")
	case ch == 'f':
		return c.literal(dst, "false")
	case ch == 'n':
		return c.literal(dst, "null")
	default:
		return dst, c.errf("unexpected character %q", ch)
	}
}

func (c *canonicalizer) literal(dst []byte, lit string) ([]byte, error) {
	if len(c.src)-c.pos < len(lit) || string(c.src[c.pos:c.pos+len(lit)]) != lit {
		return dst, c.errf("invalid literal")
	}
	c.pos += len(lit)
	return append(dst, lit...), nil
}

func (c *canonicalizer) array(dst []byte, depth int) ([]byte, error) {
	c.pos++ // [
	dst = append(dst, '[')
	c.skipWS()
	if c.pos < len(c.src) && c.src[c.pos] == ']' {
		c.pos++
		return append(dst, ']'), nil
	}
	for {
		var err error
		if dst, err = c.value(dst, depth+1); err != nil {
			return dst, err
		}
		c.skipWS()
		if c.pos >= len(c.src) {
			return dst, c.errf("unterminated array")
		}
		switch c.src[c.pos] {
		case ',':
			c.pos++
			dst = append(dst, ',')
		case ']':
			c.pos++
			return append(dst, ']'), nil
		default:
			return dst, c.errf("expected , or ] in array")
		}
	}
}

func (c *canonicalizer) object(dst []byte, depth int) ([]byte, error) {
	c.pos++ // {
	for len(c.scratch) <= depth {
		c.scratch = append(c.scratch, nil)
		c.members = append(c.members, nil)
	}
	scratch, members := c.scratch[depth][:0], c.members[depth][:0]
	c.skipWS()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
		return append(dst, '{', '}'), nil
	}
	for {
		c.skipWS()
		if c.pos >= len(c.src) || c.src[c.pos] != '"' {
			return dst, c.errf("expected a string key in object")
		}
		kstart := c.pos
		escaped, err := c.str()
		if err != nil {
			return dst, err
		}
		key := c.src[kstart:c.pos]
		sortKey := key[1 : len(key)-1]
		if escaped {
			var s string
			if err := json.Unmarshal(key, &s); err != nil {
				return dst, c.errf("invalid key: %v", err)
			}
			sortKey = []byte(s)
		}
		c.skipWS()
		if c.pos >= len(c.src) || c.src[c.pos] != ':' {
			return dst, c.errf("expected : after object key")
		}
		c.pos++
		vstart := len(scratch)
		if scratch, err = c.value(scratch, depth+1); err != nil {
			return dst, err
		}
		members = append(members, member{sortKey: sortKey, k0: int32(kstart), k1: int32(kstart + len(key)), start: int32(vstart), end: int32(len(scratch))})
		c.skipWS()
		if c.pos >= len(c.src) {
			return dst, c.errf("unterminated object")
		}
		if c.src[c.pos] == ',' {
			c.pos++
			continue
		}
		if c.src[c.pos] != '}' {
			return dst, c.errf("expected , or } in object")
		}
		c.pos++
		break
	}
	sorted := true
	for i := 1; i < len(members); i++ {
		if bytes.Compare(members[i-1].sortKey, members[i].sortKey) >= 0 {
			sorted = false
			break
		}
	}
	if !sorted {
		// Values sit in the scratch buffer in input order, so start breaks
		// ties between duplicate keys by position.
		slices.SortFunc(members, func(a, b member) int {
			if c := bytes.Compare(a.sortKey, b.sortKey); c != 0 {
				return c
			}
			return int(a.start - b.start)
		})
	}
	dst = append(dst, '{')
	first := true
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].sortKey, m.sortKey) {
			continue // a later duplicate of this key wins, as in jsonb
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, c.src[m.k0:m.k1]...)
		dst = append(dst, ':')
		dst = append(dst, scratch[m.start:m.end]...)
	}
	c.scratch[depth], c.members[depth] = scratch, members
	return append(dst, '}'), nil
}

// str scans a string starting at the opening quote; it reports whether the
// string holds escapes.
func (c *canonicalizer) str() (escaped bool, err error) {
	c.pos++ // "
	pendingHigh := false
	for c.pos < len(c.src) {
		ch := c.src[c.pos]
		switch {
		case ch == '"':
			if pendingHigh {
				c.flags.badSurrogate = true
			}
			c.pos++
			return escaped, nil
		case ch == '\\':
			escaped = true
			if c.pos+1 >= len(c.src) {
				return escaped, c.errf("unterminated escape")
			}
			e := c.src[c.pos+1]
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				if pendingHigh {
					c.flags.badSurrogate = true
					pendingHigh = false
				}
				c.pos += 2
			case 'u':
				if c.pos+6 > len(c.src) {
					return escaped, c.errf("short \\u escape")
				}
				var r rune
				for _, h := range c.src[c.pos+2 : c.pos+6] {
					var v byte
					switch {
					case h >= '0' && h <= '9':
						v = h - '0'
					case h >= 'a' && h <= 'f':
						v = h - 'a' + 10
					case h >= 'A' && h <= 'F':
						v = h - 'A' + 10
					default:
						return escaped, c.errf("invalid \\u escape")
					}
					r = r<<4 | rune(v)
				}
				switch {
				case r == 0:
					c.flags.nulEscape = true
				case r >= 0xD800 && r < 0xDC00:
					if pendingHigh {
						c.flags.badSurrogate = true
					}
					pendingHigh = true
					c.pos += 6
					continue
				case r >= 0xDC00 && r < 0xE000:
					if !pendingHigh {
						c.flags.badSurrogate = true
					}
					pendingHigh = false
					c.pos += 6
					continue
				}
				if pendingHigh {
					c.flags.badSurrogate = true
					pendingHigh = false
				}
				c.pos += 6
			default:
				return escaped, c.errf("invalid escape \\%c", e)
			}
		case ch < 0x20:
			return escaped, c.errf("control character in string")
		case ch < utf8.RuneSelf:
			if pendingHigh {
				c.flags.badSurrogate = true
				pendingHigh = false
			}
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.src[c.pos:])
			if r == utf8.RuneError && size <= 1 {
				return escaped, c.errf("invalid UTF-8")
			}
			if pendingHigh {
				c.flags.badSurrogate = true
				pendingHigh = false
			}
			c.pos += size
		}
	}
	return escaped, c.errf("unterminated string")
}

func (c *canonicalizer) number() error {
	s, i := c.src, c.pos
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		i = skipDigits(s, i)
	default:
		c.pos = i
		return c.errf("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		d := i + 1
		if i = skipDigits(s, d); i == d {
			c.pos = i
			return c.errf("invalid number: no digits after .")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		if i = skipDigits(s, d); i == d {
			c.pos = i
			return c.errf("invalid number: no digits in exponent")
		}
	}
	c.pos = i
	return nil
}

// skipDigits returns the index of the first non-digit of s at or after i.
func skipDigits(s []byte, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// storable rewrites a valid JSON text so that jsonb takes it: each \u0000
// escape and each \uD800-\uDFFF escape not in a valid pair (which jsonb
// refuses) gets its backslash escaped, so that the six characters are kept
// as text ("\u0000" becomes the string's literal text \u0000). Everything
// else is copied as it is. Only called when jsonFlags say it is needed.
func storable(raw []byte) []byte {
	out := make([]byte, 0, len(raw)+16)
	in := false
	for i := 0; i < len(raw); {
		ch := raw[i]
		switch {
		case !in:
			in = ch == '"'
			out = append(out, ch)
			i++
		case ch == '"':
			in = false
			out = append(out, ch)
			i++
		case ch != '\\':
			out = append(out, ch)
			i++
		case raw[i+1] != 'u':
			out = append(out, raw[i:i+2]...)
			i += 2
		default:
			r := hex4(raw[i+2 : i+6])
			switch {
			case r >= 0xD800 && r < 0xDC00 && i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' &&
				hex4(raw[i+8:i+12]) >= 0xDC00 && hex4(raw[i+8:i+12]) < 0xE000:
				out = append(out, raw[i:i+12]...) // a valid pair
				i += 12
				continue
			case r == 0 || (r >= 0xD800 && r < 0xE000):
				out = append(out, '\\')
			}
			out = append(out, raw[i:i+6]...)
			i += 6
		}
	}
	return out
}

// hex4 is the value of 4 hex digits (already validated).
func hex4(h []byte) rune {
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		default:
			r = r<<4 | rune(c-'A'+10)
		}
	}
	return r
}
