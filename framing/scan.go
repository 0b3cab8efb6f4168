package framing

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
)

// The scanner validates one line as strict JSON in a single pass and copies it, minus
// insignificant whitespace, into an arena. It refuses what the reference's decoder refuses:
// malformed JSON, a second value or anything else after the first, invalid UTF-8, raw
// control characters and unpaired surrogate escapes in strings, numbers that overflow
// float64, nesting deeper than MaxDepth, and a repeated member name in any object (names
// compared after unescaping). On the way it collects the members of the envelope object and
// of its "data" object, as arena spans.

type collect uint8

const (
	collectNone     collect = iota
	collectEnvelope         // the line's top-level object
	collectData             // the envelope's "data" object
)

// member is one collected object member; its compact value is arena[start:end].
type member struct {
	name       string
	start, end int
}

// pathSeg is one step of the path to the value being scanned, for error fields.
type pathSeg struct {
	key   []byte // decoded member name; nil for an array element
	index int
}

type scanner struct {
	maxDepth int
	src      []byte // the line being scanned
	pos      int
	line     int
	arena    []byte   // compact copies of every accepted line; records point into it
	members  []Member // the current slab that records' Data slices are carved from
	path     []pathSeg
	sets     []*keySet // by nesting depth; reused across objects and lines
	shapes   [2]shape  // of the envelope and "data" objects, by collect mode - 1
	top      []member  // envelope members, in input order
	data     []member  // "data" members, in input order
	isObject bool      // the line's value is an object
	intern   map[string]string
}

const internMax = 4096

func newScanner(maxDepth, arenaCap int) *scanner {
	return &scanner{
		maxDepth: maxDepth,
		arena:    make([]byte, 0, arenaCap),
		intern:   make(map[string]string),
	}
}

// scanLine validates src as one strict JSON value and leaves its envelope and data members
// in s.top and s.data.
func (s *scanner) scanLine(src []byte, line int) error {
	s.src, s.pos, s.line = src, 0, line
	s.path = s.path[:0]
	s.top = s.top[:0]
	s.data = s.data[:0]
	s.isObject = false
	if bytes.HasPrefix(src, []byte("\xef\xbb\xbf")) {
		return s.fail("a byte order mark is not allowed")
	}
	s.skipWS()
	if err := s.value(0, collectEnvelope); err != nil {
		return err
	}
	s.skipWS()
	if s.pos < len(s.src) {
		return s.fail("trailing characters after the JSON value: " + s.found())
	}
	return nil
}

// name returns b as a string, shared between lines for repeated names.
func (s *scanner) name(b []byte) string {
	if n, ok := s.intern[string(b)]; ok {
		return n
	}
	n := string(b)
	if len(s.intern) < internMax {
		s.intern[n] = n
	}
	return n
}

func (s *scanner) skipWS() {
	for s.pos < len(s.src) {
		switch s.src[s.pos] {
		case ' ', '\t', '\r', '\n':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(depth int, mode collect) error {
	if s.pos >= len(s.src) {
		return s.fail("expected a value, found end of line")
	}
	switch c := s.src[s.pos]; {
	case c == '{':
		return s.object(depth+1, mode)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, _, _, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.fail("expected a value, found " + s.found())
}

// shape is the member names of the last envelope (or "data") object whose names did not
// simply repeat the one before. Batches are written by programs, so line after line the same
// names come in the same order: while an object follows its shape, each name is recognised by
// one comparison, with no hashing to detect a repeat (a prefix of distinct names has none)
// and no interning. The first name that differs switches the object to the general path.
type shape struct {
	names []string // distinct
	keys  [][]byte // the current object's decoded names so far
}

func (s *scanner) keySet(depth int) *keySet {
	for len(s.sets) <= depth {
		s.sets = append(s.sets, newKeySet())
	}
	ks := s.sets[depth]
	ks.reset()
	return ks
}

func (s *scanner) object(depth int, mode collect) error {
	if depth > s.maxDepth {
		return s.fail(fmt.Sprintf("recursion limit exceeded: nesting deeper than %d levels", s.maxDepth))
	}
	if mode == collectEnvelope {
		s.isObject = true
	}
	s.pos++
	s.arena = append(s.arena, '{')
	// Collected objects follow their shape until a name differs; others, and those from then
	// on, check each name against a key set.
	var sh *shape
	var keys *keySet
	if mode == collectNone {
		keys = s.keySet(depth)
	} else {
		sh = &s.shapes[mode-1]
		sh.keys = sh.keys[:0]
	}
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == '}' {
		s.pos++
		s.arena = append(s.arena, '}')
		return nil
	}
	for i := 0; ; i++ {
		if s.pos >= len(s.src) || s.src[s.pos] != '"' {
			return s.fail("expected a member name string, found " + s.found())
		}
		keyPos := s.pos
		cs, ce, escaped, err := s.str()
		if err != nil {
			return err
		}
		key := s.arena[cs:ce:ce]
		if escaped {
			key = unescape(key)
		}
		s.path = append(s.path, pathSeg{key: key})
		name := ""
		if keys == nil && i < len(sh.names) && sh.names[i] == string(key) {
			name = sh.names[i]
		} else {
			if keys == nil {
				keys = s.keySet(depth)
				for _, k := range sh.keys {
					keys.add(k) // distinct: they followed the shape
				}
			}
			if !keys.add(key) {
				s.pos = keyPos
				return s.fail("duplicate JSON member '" + show(string(key)) + "'")
			}
		}
		if sh != nil {
			sh.keys = append(sh.keys, key)
			if name == "" {
				name = s.name(key)
			}
		}
		s.skipWS()
		if s.pos >= len(s.src) || s.src[s.pos] != ':' {
			return s.fail("expected ':' after a member name, found " + s.found())
		}
		s.pos++
		s.arena = append(s.arena, ':')
		s.skipWS()
		child := collectNone
		if mode == collectEnvelope && string(key) == "data" {
			child = collectData
		}
		start := len(s.arena)
		if err := s.value(depth, child); err != nil {
			return err
		}
		switch mode {
		case collectEnvelope:
			s.top = append(s.top, member{name: name, start: start, end: len(s.arena)})
		case collectData:
			s.data = append(s.data, member{name: name, start: start, end: len(s.arena)})
		}
		s.path = s.path[:len(s.path)-1]
		s.skipWS()
		if s.pos >= len(s.src) {
			return s.fail("expected ',' or '}' in an object, found end of line")
		}
		switch s.src[s.pos] {
		case ',':
			s.pos++
			s.arena = append(s.arena, ',')
			s.skipWS()
		case '}':
			s.pos++
			s.arena = append(s.arena, '}')
			if sh != nil && keys != nil {
				// The names differed: they are the shape the next line is likely to follow.
				sh.names = sh.names[:0]
				for _, m := range s.collected(mode) {
					sh.names = append(sh.names, m.name)
				}
			}
			return nil
		default:
			return s.fail("expected ',' or '}' in an object, found " + s.found())
		}
	}
}

// collected are the members gathered of the object mode collects.
func (s *scanner) collected(mode collect) []member {
	if mode == collectEnvelope {
		return s.top
	}
	return s.data
}

func (s *scanner) array(depth int) error {
	if depth > s.maxDepth {
		return s.fail(fmt.Sprintf("recursion limit exceeded: nesting deeper than %d levels", s.maxDepth))
	}
	s.pos++
	s.arena = append(s.arena, '[')
	s.skipWS()
	if s.pos < len(s.src) && s.src[s.pos] == ']' {
		s.pos++
		s.arena = append(s.arena, ']')
		return nil
	}
	s.path = append(s.path, pathSeg{})
	for i := 0; ; i++ {
		s.path[len(s.path)-1].index = i
		if err := s.value(depth, collectNone); err != nil {
			return err
		}
		s.skipWS()
		if s.pos >= len(s.src) {
			return s.fail("expected ',' or ']' in an array, found end of line")
		}
		switch s.src[s.pos] {
		case ',':
			s.pos++
			s.arena = append(s.arena, ',')
			s.skipWS()
		case ']':
			s.pos++
			s.arena = append(s.arena, ']')
			s.path = s.path[:len(s.path)-1]
			return nil
		default:
			return s.fail("expected ',' or ']' in an array, found " + s.found())
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (s *scanner) number() error {
	src := s.src
	start := s.pos
	i := start
	if src[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && isDigit(src[i]):
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	default:
		s.pos = i
		return s.fail("invalid number: expected a digit, found " + s.found())
	}
	intDigits := i - digits
	exponent := false
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || !isDigit(src[i]) {
			s.pos = i
			return s.fail("invalid number: expected a digit after '.', found " + s.found())
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		exponent = true
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			s.pos = i
			return s.fail("invalid number: expected an exponent digit, found " + s.found())
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	// Only an exponent or more than 308 integer digits can reach past float64's range.
	if exponent || intDigits > 308 {
		f, _ := strconv.ParseFloat(string(src[start:i]), 64)
		if math.IsInf(f, 0) {
			return s.fail("non-finite JSON number: " + show(string(src[start:i])))
		}
	}
	s.arena = append(s.arena, src[start:i]...)
	s.pos = i
	return nil
}

func (s *scanner) literal(word string) error {
	if !bytes.HasPrefix(s.src[s.pos:], []byte(word)) {
		return s.fail("expected a value, found " + s.found())
	}
	s.arena = append(s.arena, word...)
	s.pos += len(word)
	return nil
}

// found describes the byte at s.pos for an error message.
func (s *scanner) found() string {
	if s.pos >= len(s.src) {
		return "end of line"
	}
	return describe(s.src[s.pos])
}

func describe(c byte) string {
	if c > 0x20 && c < 0x7f && c != '\'' {
		return "'" + string(c) + "'"
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// fail reports a JSON-level refusal at s.pos, naming the path to the value being scanned.
func (s *scanner) fail(reason string) error {
	return &errs.InvalidInput{
		Line:   s.line,
		Field:  s.field(),
		Reason: fmt.Sprintf("invalid strict JSON: %s at column %d", reason, s.pos+1),
	}
}

// field renders s.path as "data.tags[2]", each name and the whole bounded for headers.
func (s *scanner) field() string {
	var b strings.Builder
	for i, seg := range s.path {
		if seg.key == nil {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(seg.index))
			b.WriteByte(']')
		} else {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(truncate(string(seg.key), maxShown))
		}
		if b.Len() > maxField {
			return truncate(b.String(), maxField)
		}
	}
	return b.String()
}

const (
	maxShown = 64  // bytes of one user-supplied name or value shown in a message
	maxField = 256 // bytes of a field path
)

// show renders user-supplied text for a message: bounded, and escaped when not printable.
func show(t string) string {
	t = truncate(t, maxShown)
	for _, r := range t {
		if !strconv.IsPrint(r) {
			q := strconv.Quote(t)
			return q[1 : len(q)-1]
		}
	}
	return t
}

// truncate cuts t to at most n bytes on a rune boundary, marking the cut with "…".
func truncate(t string, n int) string {
	if len(t) <= n {
		return t
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut] + "…"
}
