package upsert

import (
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"
)

// RecordError names the record of a page that Apply refused, and why. When
// Apply returns one, it wrote nothing of the page.
type RecordError struct {
	Index  int    // position in the page, from 0
	ID     string // the record's id as given (may be empty or invalid)
	Field  string // the field at fault: id, version, fetched_at, raw, hours, ...
	Reason string
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("record %d (id %q): %s: %s", e.Index, e.ID, e.Field, e.Reason)
}

// checkText reports why s cannot be stored in a Postgres text column.
func checkText(s string) string {
	if !utf8.ValidString(s) {
		return "invalid UTF-8"
	}
	if strings.IndexByte(s, 0) >= 0 {
		return "contains a NUL byte"
	}
	return ""
}

var zero = big.NewInt(0)

// parseDecimal converts exact decimal text ("1.25", "3", "2.5e1") into a
// Numeric without going through float64. It refuses NaN, infinities and
// negative values (hours are never negative).
func parseDecimal(s string) (pgtype.Numeric, string) {
	if s == "" {
		return pgtype.Numeric{}, "missing"
	}
	switch strings.ToLower(strings.TrimLeft(s, "+-")) {
	case "nan", "inf", "infinity":
		return pgtype.Numeric{}, fmt.Sprintf("%q is not a finite number", s)
	}
	i, neg := 0, false
	if s[0] == '-' || s[0] == '+' {
		neg = s[0] == '-'
		i++
	}
	var digits []byte
	var exp int64
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		digits = append(digits, s[i])
		i++
	}
	nInt := i - intStart
	nFrac := 0
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			digits = append(digits, s[i])
			i++
			nFrac++
		}
	}
	if nInt+nFrac == 0 {
		return pgtype.Numeric{}, fmt.Sprintf("%q is not a decimal number", s)
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			exp = exp*10 + int64(s[i]-'0')
			if exp > 1000 {
				return pgtype.Numeric{}, fmt.Sprintf("%q: exponent out of range", s)
			}
			i++
		}
		if i == start {
			return pgtype.Numeric{}, fmt.Sprintf("%q is not a decimal number", s)
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(s) {
		return pgtype.Numeric{}, fmt.Sprintf("%q is not a decimal number", s)
	}
	n := new(big.Int)
	if len(digits) <= 18 {
		var v int64
		for _, d := range digits {
			v = v*10 + int64(d-'0')
		}
		n.SetInt64(v)
	} else {
		n.SetString(string(digits), 10)
	}
	if n.Sign() != 0 && neg {
		return pgtype.Numeric{}, fmt.Sprintf("%q is negative", s)
	}
	return pgtype.Numeric{Int: n, Exp: int32(exp) - int32(nFrac), Valid: true}, ""
}
