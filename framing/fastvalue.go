package framing

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// value scans one compact JSON value at a[i], inside depth containers, and returns the index
// after it.
func (f *fastScanner) value(a []byte, i, depth int) (int, bool) {
	if i >= len(a) {
		return 0, false
	}
	switch c := a[i]; {
	case c == '"':
		end, _, ok := scanString(a, i)
		return end, ok
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(a, i)
	case c == 't':
		return literalEnd(a, i, "true")
	case c == 'f':
		return literalEnd(a, i, "false")
	case c == 'n':
		return literalEnd(a, i, "null")
	case c == '{':
		return f.object(a, i, depth+1)
	case c == '[':
		return f.array(a, i, depth+1)
	}
	return 0, false
}

func (f *fastScanner) object(a []byte, i, depth int) (int, bool) {
	if depth > f.maxDepth {
		return 0, false
	}
	i++
	if i < len(a) && a[i] == '}' {
		return i + 1, true
	}
	for len(f.sets) <= depth {
		f.sets = append(f.sets, newKeySet())
	}
	keys := f.sets[depth]
	keys.reset()
	for {
		if i >= len(a) || a[i] != '"' {
			return 0, false
		}
		end, esc, ok := scanString(a, i)
		if !ok || esc || end >= len(a) || a[end] != ':' || !keys.add(a[i+1:end-1]) {
			return 0, false
		}
		if i, ok = f.value(a, end+1, depth); !ok || i >= len(a) {
			return 0, false
		}
		switch a[i] {
		case ',':
			i++
		case '}':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

func (f *fastScanner) array(a []byte, i, depth int) (int, bool) {
	if depth > f.maxDepth {
		return 0, false
	}
	i++
	if i < len(a) && a[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = f.value(a, i, depth); !ok || i >= len(a) {
			return 0, false
		}
		switch a[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// scanString scans the string whose opening quote is a[i] and returns the index after its
// closing quote and whether it holds escapes, checking what scanner.str checks.
func scanString(a []byte, i int) (int, bool, bool) {
	i++
	escaped := false
	for {
		// Eight bytes at a time to the first one that is not plain; byte by byte near the end.
		if i+8 <= len(a) {
			w := binary.LittleEndian.Uint64(a[i:])
			m := stringStop(w)
			if m == 0 {
				i += 8
				continue
			}
			// The lowest flagged bit is the top one of the stop's byte, taken from w as is.
			t := bits.TrailingZeros64(m)
			i += t >> 3
			if byte(w>>(t&^7)) == '"' {
				return i + 1, escaped, true
			}
		} else {
			for i < len(a) && plain[a[i]] {
				i++
			}
			if i >= len(a) {
				return 0, false, false
			}
		}
		switch c := a[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			n, msg := escapeLen(a[i:])
			if msg != "" {
				return 0, false, false
			}
			escaped = true
			i += n
		case c < 0x20:
			return 0, false, false
		default:
			r, size := utf8.DecodeRune(a[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, false, false
			}
			i += size
		}
	}
}

// stringStop has the top bit set in the lowest byte of w that is not plain (and maybe in some
// above it): the same test as special, per byte.
func stringStop(w uint64) uint64 {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((w-lsb*0x20)&^w | (q-lsb)&^q | (b-lsb)&^b | w) & msb
}

// scanNumber scans a number at a[i] with scanner.number's grammar and range check.
func scanNumber(a []byte, i int) (int, bool) {
	start := i
	if a[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(a) && a[i] == '0':
		i++
	case i < len(a) && isDigit(a[i]):
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	default:
		return 0, false
	}
	intDigits := i - digits
	exponent := false
	if i < len(a) && a[i] == '.' {
		i++
		if i >= len(a) || !isDigit(a[i]) {
			return 0, false
		}
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	}
	if i < len(a) && (a[i] == 'e' || a[i] == 'E') {
		exponent = true
		i++
		if i < len(a) && (a[i] == '+' || a[i] == '-') {
			i++
		}
		if i >= len(a) || !isDigit(a[i]) {
			return 0, false
		}
		for i < len(a) && isDigit(a[i]) {
			i++
		}
	}
	if exponent || intDigits > 308 {
		v, _ := strconv.ParseFloat(unsafeString(a[start:i]), 64)
		if math.IsInf(v, 0) {
			return 0, false
		}
	}
	return i, true
}

func literalEnd(a []byte, i int, word string) (int, bool) {
	if !hasPrefix(a[i:], word) {
		return 0, false
	}
	return i + len(word), true
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
