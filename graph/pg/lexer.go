package pg

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind int

const (
	tEOF tokKind = iota
	tTypeName
	tIdent
	tInt    // digits, optionally with a leading '-'
	tFloat  // digits '.' digits, optionally with a leading '-'
	tString // raw literal including the quotes
	tLBrace
	tRBrace
	tLParen
	tRParen
	tLBrack
	tRBrack
	tColon
	tComma
	tQuestion
	tEq
	tAt
	tArrow
	tDotDot
	tIllegal
)

type token struct {
	kind tokKind
	text string
	pos  Pos
	off  int // byte offset of the first character
	end  int // byte offset just past the token
}

// describe renders a token for the "found" half of a ParseError.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tString:
		return "string " + truncate(t.text)
	case tInt, tFloat:
		return "number " + truncate(t.text)
	}
	return "'" + truncate(t.text) + "'"
}

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	r := []rune(s)
	return string(r[:37]) + "..."
}

type lexer struct {
	src  string
	off  int
	line int
	col  int
	file string
}

func newLexer(file, src string) *lexer {
	return &lexer{src: src, line: 1, col: 1, file: file}
}

func (l *lexer) pos() Pos { return Pos{Line: l.line, Column: l.col} }

func (l *lexer) errAt(p Pos, expected, found string) *ParseError {
	return &ParseError{File: l.file, Line: p.Line, Column: p.Column, Expected: expected, Found: found}
}

// advance moves past n bytes, keeping line and column (in code points).
func (l *lexer) advance(n int) {
	for i := 0; i < n && l.off < len(l.src); i++ {
		c := l.src[l.off]
		l.off++
		switch {
		case c == '\n':
			l.line++
			l.col = 1
		case c&0xC0 != 0x80: // not a UTF-8 continuation byte
			l.col++
		}
	}
}

// skipTrivia skips whitespace and comments. '#' is not a comment.
func (l *lexer) skipTrivia() *ParseError {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			l.advance(1)
		case strings.HasPrefix(l.src[l.off:], "//"):
			i := strings.IndexByte(l.src[l.off:], '\n')
			if i < 0 {
				i = len(l.src) - l.off
			}
			l.advance(i)
		case strings.HasPrefix(l.src[l.off:], "/*"):
			start := l.pos()
			i := strings.Index(l.src[l.off+2:], "*/")
			if i < 0 {
				return l.errAt(start, "'*/' to close the block comment", "end of input")
			}
			l.advance(i + 4)
		default:
			return nil
		}
	}
	return nil
}

func isDigit(c byte) bool       { return c >= '0' && c <= '9' }
func isUpper(c byte) bool       { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool       { return c >= 'a' && c <= 'z' }
func isIdentCont(c byte) bool   { return isDigit(c) || isUpper(c) || isLower(c) || c == '_' }
func isEnumValChar(c byte) bool { return isIdentCont(c) || c == '-' }

func (l *lexer) span(n int) int {
	i := l.off + n
	for i < len(l.src) && isIdentCont(l.src[i]) {
		i++
	}
	return i - l.off
}

func (l *lexer) digits(from int) int {
	i := from
	for i < len(l.src) && isDigit(l.src[i]) {
		i++
	}
	return i
}

var punct = map[byte]tokKind{'{': tLBrace, '}': tRBrace, '(': tLParen, ')': tRParen, '[': tLBrack,
	']': tRBrack, ':': tColon, ',': tComma, '?': tQuestion, '=': tEq, '@': tAt}

// next scans one token in the ordinary mode.
func (l *lexer) next() (token, *ParseError) {
	if err := l.skipTrivia(); err != nil {
		return token{}, err
	}
	t := token{pos: l.pos(), off: l.off}
	if l.off >= len(l.src) {
		t.kind, t.end = tEOF, l.off
		return t, nil
	}
	c := l.src[l.off]
	n := 1
	switch {
	case isUpper(c):
		t.kind, n = tTypeName, l.span(1)
	case isLower(c) || c == '_':
		t.kind, n = tIdent, l.span(1)
	case isDigit(c) || (c == '-' && l.off+1 < len(l.src) && isDigit(l.src[l.off+1])):
		start := l.off
		if c == '-' {
			start++
		}
		end := l.digits(start)
		t.kind = tInt
		if end+1 < len(l.src) && l.src[end] == '.' && isDigit(l.src[end+1]) {
			end = l.digits(end + 1)
			t.kind = tFloat
		}
		n = end - l.off
	case c == '"':
		i := l.off + 1
		for i < len(l.src) && l.src[i] != '"' {
			if l.src[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(l.src) {
			return token{}, l.errAt(t.pos, "'\"' to close the string literal", "end of input")
		}
		t.kind, n = tString, i+1-l.off
	case c == '-' && strings.HasPrefix(l.src[l.off:], "->"):
		t.kind, n = tArrow, 2
	case c == '.' && strings.HasPrefix(l.src[l.off:], ".."):
		t.kind, n = tDotDot, 2
	default:
		if k, ok := punct[c]; ok {
			t.kind = k
		} else {
			t.kind = tIllegal
			if c >= utf8.RuneSelf {
				_, n = utf8.DecodeRuneInString(l.src[l.off:])
			}
		}
	}
	t.text = l.src[l.off : l.off+n]
	l.advance(n)
	t.end = l.off
	return t, nil
}

// nextEnumValue scans an enum value: one or more of ASCII alnum, '_', '-'.
// ok is false (and nothing is consumed) when no such character follows.
func (l *lexer) nextEnumValue() (t token, ok bool, perr *ParseError) {
	if perr = l.skipTrivia(); perr != nil {
		return token{}, false, perr
	}
	i := l.off
	for i < len(l.src) && isEnumValChar(l.src[i]) {
		i++
	}
	if i == l.off {
		return token{}, false, nil
	}
	t = token{kind: tIdent, text: l.src[l.off:i], pos: l.pos(), off: l.off}
	l.advance(i - l.off)
	t.end = l.off
	return t, true, nil
}

// decodeString decodes a raw string literal (with quotes). Supported escapes
// are \" \\ \n \r \t; anything else is refused, as by the reference.
func decodeString(file string, t token) (string, error) {
	raw := t.text[1 : len(t.text)-1]
	if !strings.Contains(raw, `\`) {
		return raw, nil
	}
	var b strings.Builder
	line, col := t.pos.Line, t.pos.Column+1
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			if c == '\n' {
				line, col = line+1, 1
			} else if c&0xC0 != 0x80 {
				col++
			}
			continue
		}
		i++
		switch raw[i] {
		case '"':
			b.WriteByte('"')
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		default:
			r, _ := utf8.DecodeRuneInString(raw[i:])
			return "", &SemanticError{File: file, Line: line, Column: col, Code: CodeInvalidString,
				Message: "unsupported escape sequence: \\" + string(r) + ` (supported: \" \\ \n \r \t)`}
		}
		col += 2
	}
	return b.String(), nil
}

// parseUint32 parses a decimal u32, reporting overflow.
func parseUint32(s string) (uint32, bool) {
	v, err := strconv.ParseUint(s, 10, 32)
	return uint32(v), err == nil
}
