package rows

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/framing"
)

// CanonicalScalar renders row i of arr as its canonical key string (docs/omnigraph-format.md §5.3): strings
// as is, integers and Date (epoch days) / DateTime (epoch ms) in decimal, Bool as
// true/false, floats at their stored width as the shortest round-trip decimal without an
// exponent with ±0 as "0". ok is false for a null (null members exempt a row from
// uniqueness). Non-finite floats and list, vector or blob values are refused.
//
// It is the one renderer behind @key ids and @unique tuples, so the engine can use it for
// the committed-side probes and agree with Build exactly.
func CanonicalScalar(arr arrow.Array, i int) (string, bool, error) {
	return canonicalScalar(arr, i, true)
}

// canonicalScalar is CanonicalScalar; with clone false a string result may share the
// array's memory (for short-lived map keys).
func canonicalScalar(arr arrow.Array, i int, clone bool) (string, bool, error) {
	if arr.IsNull(i) {
		return "", false, nil
	}
	switch a := arr.(type) {
	case *array.String:
		if clone {
			return strings.Clone(a.Value(i)), true, nil
		}
		return a.Value(i), true, nil
	case *array.LargeString:
		return strings.Clone(a.Value(i)), true, nil
	case *array.StringView:
		return strings.Clone(a.Value(i)), true, nil
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10), true, nil
	case *array.Uint32:
		return strconv.FormatUint(uint64(a.Value(i)), 10), true, nil
	case *array.Uint64:
		return strconv.FormatUint(a.Value(i), 10), true, nil
	case *array.Float32:
		s, err := canonicalFloat(float64(a.Value(i)), 32)
		return s, err == nil, err
	case *array.Float64:
		s, err := canonicalFloat(a.Value(i), 64)
		return s, err == nil, err
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i)), true, nil
	case *array.Date32:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	case *array.Date64:
		return strconv.FormatInt(int64(a.Value(i)), 10), true, nil
	}
	return "", false, fmt.Errorf("scalar key: unsupported column type %s for @unique/@key enforcement", arr.DataType())
}

func canonicalFloat(v float64, bits int) (string, error) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		width := "Float64"
		if bits == 32 {
			width = "Float32"
		}
		return "", fmt.Errorf("scalar key: non-finite %s value %s cannot identify an entity", width, rustFloat(v))
	}
	if v == 0 {
		return "0", nil
	}
	return strconv.FormatFloat(v, 'f', -1, bits), nil
}

// rustFloat renders a float64 the way Rust's Display does: shortest round-trip decimal,
// never an exponent; NaN and inf spelled as Rust spells them.
func rustFloat(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// TupleID encodes a canonical key tuple as a node id: a single member as itself, a
// composite as the compact JSON array of the member strings (serde_json escaping).
func TupleID(parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	return string(appendTupleID(nil, parts))
}

func appendTupleID(b []byte, parts []string) []byte {
	if len(parts) == 1 {
		return append(b, parts[0]...)
	}
	b = append(b, '[')
	for i, p := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = framing.AppendJSONString(b, p)
	}
	return append(b, ']')
}

// FormatTuple renders a column list or a value tuple for messages: one item as itself, a
// composite as "(a, b)".
func FormatTuple(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return "(" + strings.Join(items, ", ") + ")"
}

// UniqueViolation is the reference's @unique message (docs/omnigraph-format.md §5.6):
// "@unique violation on T.col: value 'v' held by 'a' and 'b'", composite "T.(a, b)".
func UniqueViolation(typeName string, columns, key []string, holder, id string) string {
	return fmt.Sprintf("@unique violation on %s.%s: value '%s' held by '%s' and '%s'",
		typeName, FormatTuple(columns), FormatTuple(key), holder, id)
}

// Rust's regex crate (used by @check) reads \d, \s and \w as Unicode classes; Go's RE2
// reads them as ASCII. translateRegex rewrites them to Unicode forms Go understands, so
// the same pattern matches the same strings. Left as Go reads them (documented
// differences): \b and \B (ASCII word boundaries in Go), and \S, \W inside a bracket class.
const (
	uniSpace = `\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`
	uniWord  = `\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}`
)

func translateRegex(p string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			i++
			e := p[i]
			switch {
			case e == 'd':
				b.WriteString(`\p{Nd}`)
			case e == 'D':
				b.WriteString(`\P{Nd}`)
			case e == 's' && inClass:
				b.WriteString(uniSpace)
			case e == 's':
				b.WriteString("[" + uniSpace + "]")
			case e == 'S' && !inClass:
				b.WriteString("[^" + uniSpace + "]")
			case e == 'w' && inClass:
				b.WriteString(uniWord)
			case e == 'w':
				b.WriteString("[" + uniWord + "]")
			case e == 'W' && !inClass:
				b.WriteString("[^" + uniWord + "]")
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
		case !inClass && c == '[':
			inClass = true
			b.WriteByte(c)
			// A ']' right after '[' or '[^' is a literal member.
			if i+1 < len(p) && p[i+1] == '^' {
				i++
				b.WriteByte('^')
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
				b.WriteByte(']')
			}
		case inClass && c == '[' && i+1 < len(p) && p[i+1] == ':':
			// POSIX class [:alpha:]: copy through its closing ":]".
			end := strings.Index(p[i+2:], ":]")
			if end < 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(p[i : i+2+end+2])
			i += 2 + end + 1
		case inClass && c == ']':
			inClass = false
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// compileCheck compiles an @check pattern with Rust regex semantics for the classes above.
func compileCheck(pattern string) (*regexp.Regexp, error) {
	return regexp.Compile(translateRegex(pattern))
}
