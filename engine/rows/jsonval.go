package rows

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// The values of framing.Record.Data are JSON texts (compact as framing emits them, though
// whitespace is tolerated). These helpers read them without building a generic tree.

type jkind uint8

const (
	jInvalid jkind = iota
	jNull
	jBool
	jNumber
	jString
	jArray
	jObject
)

var errMalformed = errors.New("malformed JSON value")

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimWS(b []byte) []byte {
	for len(b) > 0 && isWS(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isWS(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// kindOf classifies a (trimmed) JSON value by its first byte.
func kindOf(raw []byte) jkind {
	if len(raw) == 0 {
		return jInvalid
	}
	switch c := raw[0]; {
	case c == 'n':
		return jNull
	case c == 't' || c == 'f':
		return jBool
	case c == '"':
		return jString
	case c == '[':
		return jArray
	case c == '{':
		return jObject
	case c == '-' || (c >= '0' && c <= '9'):
		return jNumber
	}
	return jInvalid
}

// jnum is a JSON number classified the way serde_json (the reference's parser) does: a
// non-negative integer token that fits u64 is U64, a negative one whose magnitude is in
// [1, 2^63] is I64, everything else (fractions, exponents, overflow, and "-0") is F64.
type jnum struct {
	kind uint8 // numU64, numI64, numF64
	u    uint64
	i    int64
	f    float64
}

const (
	numU64 = iota + 1
	numI64
	numF64
)

func parseNumber(raw []byte) (jnum, bool) {
	if n, ok := parseShortInteger(raw); ok {
		return n, true
	}
	s := string(raw)
	integer := bytes.IndexAny(raw, ".eE") < 0
	if integer {
		if raw[0] != '-' {
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return jnum{kind: numU64, u: u}, true
			}
		} else if mag, err := strconv.ParseUint(s[1:], 10, 64); err == nil && mag != 0 && mag <= 1<<63 {
			return jnum{kind: numI64, i: int64(-mag)}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil { // not a number, or ±Inf (framing refuses those already)
		return jnum{}, false
	}
	return jnum{kind: numF64, f: f}, true
}

// parseShortInteger is parseNumber's common case without strconv: an optional minus and at
// most 19 digits, which cannot overflow a uint64. "-0" is left to the general path (F64).
func parseShortInteger(raw []byte) (jnum, bool) {
	digits := raw
	neg := len(raw) > 0 && raw[0] == '-'
	if neg {
		digits = raw[1:]
	}
	if len(digits) == 0 || len(digits) > 19 {
		return jnum{}, false
	}
	var v uint64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return jnum{}, false
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case !neg:
		return jnum{kind: numU64, u: v}, true
	case v != 0 && v <= 1<<63:
		return jnum{kind: numI64, i: int64(-v)}, true
	}
	return jnum{}, false
}

// asI64 mirrors serde_json's Number::as_i64.
func (n jnum) asI64() (int64, bool) {
	switch n.kind {
	case numI64:
		return n.i, true
	case numU64:
		if n.u <= 1<<63-1 {
			return int64(n.u), true
		}
	}
	return 0, false
}

// asU64 mirrors serde_json's Number::as_u64.
func (n jnum) asU64() (uint64, bool) {
	if n.kind == numU64 {
		return n.u, true
	}
	return 0, false
}

// asF64 mirrors serde_json's Number::as_f64.
func (n jnum) asF64() float64 {
	switch n.kind {
	case numU64:
		return float64(n.u)
	case numI64:
		return float64(n.i)
	}
	return n.f
}

// decodeString decodes a JSON string token.
func decodeString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", errMalformed
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		if !utf8.Valid(body) {
			return "", errMalformed
		}
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errMalformed
	}
	return s, nil
}

// stringLen is the decoded byte length of a JSON string token.
func stringLen(raw []byte) int {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		return len(raw) - 2
	}
	s, _ := decodeString(raw)
	return len(s)
}

// valueEnd returns the index just past the JSON value starting at raw[pos].
func valueEnd(raw []byte, pos int) (int, error) {
	if pos >= len(raw) {
		return 0, errMalformed
	}
	switch raw[pos] {
	case '"':
		for i := pos + 1; i < len(raw); i++ {
			switch raw[i] {
			case '\\':
				i++
			case '"':
				return i + 1, nil
			}
		}
		return 0, errMalformed
	case '[', '{':
		depth := 0
		for i := pos; i < len(raw); i++ {
			switch raw[i] {
			case '"':
				end, err := valueEnd(raw, i)
				if err != nil {
					return 0, err
				}
				i = end - 1
			case '[', '{':
				depth++
			case ']', '}':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
		}
		return 0, errMalformed
	}
	i := pos
	for i < len(raw) && raw[i] != ',' && raw[i] != ']' && raw[i] != '}' && raw[i] != ':' && !isWS(raw[i]) {
		i++
	}
	if i == pos {
		return 0, errMalformed
	}
	return i, nil
}

// eachItem calls fn with every element of a JSON array (trimmed) and its index.
func eachItem(raw []byte, fn func(i int, item []byte) error) error {
	return eachEntry(raw, '[', ']', func(i int, _, item []byte) error { return fn(i, item) })
}

// eachMember calls fn with every member of a JSON object: its key token and its value.
func eachMember(raw []byte, fn func(key, value []byte) error) error {
	return eachEntry(raw, '{', '}', func(_ int, key, value []byte) error { return fn(key, value) })
}

func eachEntry(raw []byte, open, closing byte, fn func(i int, key, value []byte) error) error {
	raw = trimWS(raw)
	if len(raw) < 2 || raw[0] != open {
		return errMalformed
	}
	pos := skipWS(raw, 1)
	if pos < len(raw) && raw[pos] == closing {
		return nil
	}
	for i := 0; ; i++ {
		var key []byte
		if open == '{' {
			end, err := valueEnd(raw, pos)
			if err != nil || raw[pos] != '"' {
				return errMalformed
			}
			key = raw[pos:end]
			pos = skipWS(raw, end)
			if pos >= len(raw) || raw[pos] != ':' {
				return errMalformed
			}
			pos = skipWS(raw, pos+1)
		}
		end, err := valueEnd(raw, pos)
		if err != nil {
			return err
		}
		if err := fn(i, key, raw[pos:end]); err != nil {
			return err
		}
		pos = skipWS(raw, end)
		if pos >= len(raw) {
			return errMalformed
		}
		if raw[pos] == closing {
			return nil
		}
		if raw[pos] != ',' {
			return errMalformed
		}
		pos = skipWS(raw, pos+1)
	}
}

func skipWS(raw []byte, pos int) int {
	for pos < len(raw) && isWS(raw[pos]) {
		pos++
	}
	return pos
}
