package pg

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A tiny ordered JSON writer reproducing serde_json's compact and pretty
// output byte for byte: the accepted schema identity is a SHA-256 over the
// compact form, so key order, string escaping and float spelling must match
// the reference engine exactly. encoding/json is not used for output because
// it escapes U+2028/U+2029 (and, by default, <>&), which serde_json does not.

// jv is one of: nil, bool, string, uint64, int64, float64, []jv, *jobject.
type jv any

type jobject struct {
	keys []string
	vals []jv
}

// obj builds an object from alternating key, value arguments.
func obj(kv ...any) *jobject {
	o := &jobject{}
	for i := 0; i < len(kv); i += 2 {
		o.keys = append(o.keys, kv[i].(string))
		o.vals = append(o.vals, kv[i+1])
	}
	return o
}

func (o *jobject) add(k string, v jv) *jobject {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
	return o
}

func strs(ss []string) []jv {
	out := make([]jv, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func list[T any](items []T, f func(T) jv) []jv {
	out := make([]jv, len(items))
	for i, it := range items {
		out[i] = f(it)
	}
	return out
}

func compactJSON(v jv) string {
	var b strings.Builder
	writeJSON(&b, v, -1)
	return b.String()
}

func prettyJSON(v jv) string {
	var b strings.Builder
	writeJSON(&b, v, 0)
	return b.String()
}

func sha256Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeJSON writes v; depth < 0 means compact, otherwise pretty with two-space
// indentation at the given depth (serde_json's PrettyFormatter).
func writeJSON(b *strings.Builder, v jv, depth int) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeJSONString(b, x)
	case uint64:
		b.WriteString(strconv.FormatUint(x, 10))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(formatFloatSerde(x))
	case []jv:
		if len(x) == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, deeper(depth))
			writeJSON(b, e, deeper(depth))
		}
		newline(b, depth)
		b.WriteByte(']')
	case *jobject:
		if len(x.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, deeper(depth))
			writeJSONString(b, k)
			b.WriteByte(':')
			if depth >= 0 {
				b.WriteByte(' ')
			}
			writeJSON(b, x.vals[i], deeper(depth))
		}
		newline(b, depth)
		b.WriteByte('}')
	default:
		panic("pg: unsupported JSON value")
	}
}

func deeper(depth int) int {
	if depth < 0 {
		return depth
	}
	return depth + 1
}

func newline(b *strings.Builder, depth int) {
	if depth < 0 {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString("  ")
	}
}

// writeJSONString escapes like serde_json: '"' and '\\', the short escapes
// \b \f \n \r \t, other control characters as \u00XX (lowercase hex), and
// everything else (including U+2028/U+2029 and non-ASCII) verbatim.
func writeJSONString(b *strings.Builder, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hexDigits[c>>4])
				b.WriteByte(hexDigits[c&0xF])
			} else if c < utf8.RuneSelf {
				b.WriteByte(c)
			} else {
				// Source text is validated as UTF-8 before it reaches here.
				r, n := utf8.DecodeRuneInString(s[i:])
				b.WriteRune(r)
				i += n - 1
			}
		}
	}
	b.WriteByte('"')
}

// shortestDigits returns the shortest round-trip decimal digits of |f| and
// the exponent kk such that |f| = 0.d1d2… × 10^kk.
func shortestDigits(f float64) (digits string, kk int) {
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	x, _ := strconv.Atoi(exp)
	return strings.Replace(mant, ".", "", 1), x + 1
}

// formatFloatSerde spells a finite f64 like serde_json (the ryu crate's
// pretty printer): decimal notation for 1e-5 <= |f| < 1e16 with a trailing
// ".0" on integral values, otherwise d.ddde±X without a '+'.
func formatFloatSerde(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "null"
	}
	sign := ""
	if math.Signbit(f) {
		sign = "-"
	}
	d, kk := shortestDigits(f)
	n := len(d)
	k := kk - n
	switch {
	case k >= 0 && kk <= 16:
		return sign + d + strings.Repeat("0", k) + ".0"
	case kk > 0 && kk <= 16:
		return sign + d[:kk] + "." + d[kk:]
	case kk > -5 && kk <= 0:
		return sign + "0." + strings.Repeat("0", -kk) + d
	case n == 1:
		return sign + d + "e" + strconv.Itoa(kk-1)
	default:
		return sign + d[:1] + "." + d[1:] + "e" + strconv.Itoa(kk-1)
	}
}

// formatFloatRustDebug spells f like Rust's `{:?}` for f64 (used only inside
// constraint sort keys): decimal with at least one fractional digit for
// 1e-4 <= |f| < 1e16 (and zero), otherwise shortest exponential `1.5e-7`.
func formatFloatRustDebug(f float64) string {
	a := math.Abs(f)
	if a != 0 && (a < 1e-4 || a >= 1e16) {
		sign := ""
		if math.Signbit(f) {
			sign = "-"
		}
		d, kk := shortestDigits(f)
		m := d[:1]
		if len(d) > 1 {
			m += "." + d[1:]
		}
		return sign + m + "e" + strconv.Itoa(kk-1)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
