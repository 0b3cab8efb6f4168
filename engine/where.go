package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// A where clause selects rows by their properties (Find, `worker find --where`):
//
//	clause    := condition { "and" condition }
//	condition := property op value
//	op        := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//	value     := 'quoted' ('' for a quote) | "quoted" (\" and \\) | a bare word
//
// A property is a name of the type's (or id; src/from and dst/to on an edge). A value is read as
// the property's type when the clause is applied: a number, true/false, a date as YYYY-MM-DD
// or epoch days, a date-time as RFC 3339 or epoch milliseconds, anything as a string.

// MaxWhereBytes bounds a where clause.
const MaxWhereBytes = 4096

// Condition is one comparison of a where clause.
type Condition struct {
	Property string
	Op       string // "=", "!=", "<", "<=", ">" or ">="
	Value    string // the literal, unquoted
	// Pos and ValuePos are the 1-based byte columns of the property and the value in the
	// clause, for errors.
	Pos, ValuePos int
}

// WhereError is a where clause refused: its 1-based byte column and why.
type WhereError struct {
	Pos    int
	Reason string
}

func (e *WhereError) Error() string {
	return fmt.Sprintf("where clause, column %d: %s", e.Pos, e.Reason)
}

// ErrorKind: a where clause is input refused as it stands.
func (e *WhereError) ErrorKind() string { return errs.KindInvalid }

// String renders the condition so that ParseWhere reads it back the same.
func (c Condition) String() string {
	return c.Property + " " + c.Op + " '" + strings.ReplaceAll(c.Value, "'", "''") + "'"
}

// ParseWhere parses a where clause into its conditions (at least one).
func ParseWhere(s string) ([]Condition, error) {
	if len(s) > MaxWhereBytes {
		return nil, &WhereError{Pos: MaxWhereBytes + 1, Reason: fmt.Sprintf("longer than %d bytes", MaxWhereBytes)}
	}
	if !utf8.ValidString(s) {
		return nil, &WhereError{Pos: 1 + invalidUTF8At(s), Reason: "not UTF-8"}
	}
	p := &whereParser{s: s}
	var out []Condition
	for {
		c, err := p.condition()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		p.space()
		if p.i == len(s) {
			return out, nil
		}
		at := p.i
		if w := p.word(); !strings.EqualFold(w, "and") {
			return nil, &WhereError{Pos: at + 1, Reason: fmt.Sprintf("expected 'and' or the end, found %s", p.show(at))}
		}
	}
}

func invalidUTF8At(s string) int {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i
			}
		}
	}
	return 0
}

type whereParser struct {
	s string
	i int
}

func (p *whereParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// show names what stands at byte i, for an error.
func (p *whereParser) show(i int) string {
	if i >= len(p.s) {
		return "the end"
	}
	end := i
	for end < len(p.s) && end-i < 16 && p.s[end] != ' ' {
		_, n := utf8.DecodeRuneInString(p.s[end:])
		end += n
	}
	return fmt.Sprintf("%q", p.s[i:end])
}

func identByte(b byte, first bool) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || !first && b >= '0' && b <= '9'
}

// word reads an identifier ("" when none starts here).
func (p *whereParser) word() string {
	start := p.i
	for p.i < len(p.s) && identByte(p.s[p.i], p.i == start) {
		p.i++
	}
	return p.s[start:p.i]
}

func (p *whereParser) condition() (Condition, error) {
	p.space()
	var c Condition
	c.Pos = p.i + 1
	if c.Property = p.word(); c.Property == "" {
		return c, &WhereError{Pos: c.Pos, Reason: fmt.Sprintf("expected a property name, found %s", p.show(p.i))}
	}
	p.space()
	at := p.i
	for _, op := range []string{"==", "!=", "<>", "<=", ">=", "=", "<", ">"} {
		if strings.HasPrefix(p.s[p.i:], op) {
			c.Op = map[string]string{"==": "=", "<>": "!="}[op]
			if c.Op == "" {
				c.Op = op
			}
			p.i += len(op)
			break
		}
	}
	if c.Op == "" {
		return c, &WhereError{Pos: at + 1, Reason: fmt.Sprintf("expected an operator (=, !=, <, <=, >, >=) after %s, found %s", c.Property, p.show(at))}
	}
	p.space()
	c.ValuePos = p.i + 1
	v, err := p.value()
	c.Value = v
	return c, err
}

func (p *whereParser) value() (string, error) {
	start := p.i
	if p.i == len(p.s) {
		return "", &WhereError{Pos: start + 1, Reason: "expected a value, found the end"}
	}
	switch q := p.s[p.i]; q {
	case '\'', '"':
		var b strings.Builder
		p.i++
		for p.i < len(p.s) {
			c := p.s[p.i]
			switch {
			case c == q && q == '\'' && p.i+1 < len(p.s) && p.s[p.i+1] == '\'':
				b.WriteByte('\'')
				p.i += 2
			case c == q:
				p.i++
				return b.String(), nil
			case c == '\\' && q == '"' && p.i+1 < len(p.s) && (p.s[p.i+1] == '"' || p.s[p.i+1] == '\\'):
				b.WriteByte(p.s[p.i+1])
				p.i += 2
			default:
				b.WriteByte(c)
				p.i++
			}
		}
		return "", &WhereError{Pos: start + 1, Reason: "unterminated quoted value"}
	}
	for p.i < len(p.s) && !strings.ContainsRune(" \t\r\n'\"", rune(p.s[p.i])) {
		p.i++
	}
	if p.i == start {
		return "", &WhereError{Pos: start + 1, Reason: fmt.Sprintf("expected a value, found %s", p.show(start))}
	}
	return p.s[start:p.i], nil
}
