package framing

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// plain[c] is true for bytes a string may hold as they are: printable ASCII but '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// special reports whether any of the 8 bytes in w is not plain: below 0x20, '"', '\\' or
// at least 0x80. (x-lsb*n) & ^x & msb is non-zero exactly when some byte of x is below n.
func special(w uint64) bool {
	q := w ^ (lsb * '"')
	b := w ^ (lsb * '\\')
	return ((w-lsb*0x20)&^w|(q-lsb)&^q|(b-lsb)&^b|w)&msb != 0
}

// str scans a string at s.pos, copies it (quotes and escapes as written) to the arena and
// returns the arena span of its content and whether it holds escapes.
func (s *scanner) str() (cs, ce int, escaped bool, err error) {
	src := s.src
	start := s.pos
	i := start + 1
	for {
		for i+8 <= len(src) && !special(binary.LittleEndian.Uint64(src[i:])) {
			i += 8
		}
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i >= len(src) {
			s.pos = i
			return 0, 0, false, s.fail("unterminated string")
		}
		switch c := src[i]; {
		case c == '"':
			cs = len(s.arena) + 1
			s.arena = append(s.arena, src[start:i+1]...)
			s.pos = i + 1
			return cs, len(s.arena) - 1, escaped, nil
		case c == '\\':
			n, msg := escapeLen(src[i:])
			if msg != "" {
				s.pos = i
				return 0, 0, false, s.fail(msg)
			}
			escaped = true
			i += n
		case c < 0x20:
			s.pos = i
			return 0, 0, false, s.fail(fmt.Sprintf("control character 0x%02x in a string must be escaped", c))
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size == 1 {
				s.pos = i
				return 0, 0, false, s.fail("invalid UTF-8 in a string")
			}
			i += size
		}
	}
}

// escapeLen validates the escape sequence at b[0] == '\\' and returns its length, or a
// reason. A \u escape of a UTF-16 surrogate must be a leading one followed by a trailing one.
func escapeLen(b []byte) (int, string) {
	if len(b) < 2 {
		return 0, "unterminated string"
	}
	switch b[1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
	default:
		return 0, "invalid escape " + describe(b[1])
	}
	u, ok := hex4(b[2:])
	if !ok {
		return 0, "invalid \\u escape: expected 4 hex digits"
	}
	switch {
	case u >= 0xDC00 && u <= 0xDFFF:
		return 0, "lone trailing surrogate in \\u escape"
	case u >= 0xD800 && u <= 0xDBFF:
		if len(b) < 12 || b[6] != '\\' || b[7] != 'u' {
			return 0, "lone leading surrogate in \\u escape"
		}
		lo, ok := hex4(b[8:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, "lone leading surrogate in \\u escape"
		}
		return 12, ""
	}
	return 6, ""
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// unescape decodes the content of a validated JSON string.
func unescape(b []byte) []byte { return appendUnescaped(make([]byte, 0, len(b)), b) }

// appendUnescaped appends the decoded content of a validated JSON string to out.
func appendUnescaped(out, b []byte) []byte {
	for i := 0; i < len(b); {
		c := b[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch b[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(b[i+2:])
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4(b[i+8:])
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default: // '"', '\\', '/'
			out = append(out, b[i+1])
		}
		i += 2
	}
	return out
}

// stringValue decodes a validated JSON string value (quotes included).
func stringValue(v []byte) string {
	content := v[1 : len(v)-1]
	if bytes.IndexByte(content, '\\') < 0 {
		return string(content)
	}
	return string(unescape(content))
}
