package pg

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Parse parses `.pg` source (errors name the file "schema.pg"). It checks
// syntax and the rules local to one type expression (known base types,
// Vector and @card bounds, enum duplicates, string escapes); Analyze checks
// the rest.
func Parse(src string) (*File, error) { return ParseFile(DefaultFileName, src) }

// ParseFile is Parse with the file name used in error messages. Every error
// is a *ParseError or a *SemanticError.
func ParseFile(name, src string) (f *File, err error) {
	if !utf8.ValidString(src) {
		return nil, invalidUTF8(name, src)
	}
	p := &parser{lx: newLexer(name, src), file: name}
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			f, err = nil, b.err
		}
	}()
	p.advance()
	f = &File{Name: name}
	for p.tok.kind != tEOF {
		f.Decls = append(f.Decls, p.decl())
	}
	return f, nil
}

func invalidUTF8(name, src string) error {
	lx := newLexer(name, "")
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && n == 1 {
			lx.src = src[:i]
			lx.advance(i)
			return lx.errAt(lx.pos(), "UTF-8 text", fmt.Sprintf("invalid byte 0x%02x", src[i]))
		}
		i += n
	}
	return nil
}

// bailout carries a typed error out of the recursive descent.
type bailout struct{ err error }

type parser struct {
	lx   *lexer
	tok  token
	prev token
	file string
}

func (p *parser) fail(err error) { panic(bailout{err}) }

func (p *parser) failAt(t token, expected string) {
	found := t.describe()
	switch {
	case t.kind == tAt:
		// Name the annotation: found '@key' rather than '@'.
		lx := &lexer{src: p.lx.src, off: t.end}
		if n, err := lx.next(); err == nil && n.kind == tIdent && n.off == t.end {
			found = "'@" + n.text + "'"
		}
	case t.kind == tIllegal && t.text == "#":
		expected += " ('#' does not start a comment; use // or /* */)"
	}
	p.fail(p.lx.errAt(t.pos, expected, found))
}

func (p *parser) semantic(pos Pos, code Code, format string, args ...any) {
	p.fail(&SemanticError{File: p.file, Line: pos.Line, Column: pos.Column, Code: code,
		Message: fmt.Sprintf(format, args...)})
}

func (p *parser) advance() {
	t, err := p.lx.next()
	if err != nil {
		p.fail(err)
	}
	p.prev, p.tok = p.tok, t
}

// peek returns the token after the current one without consuming anything.
func (p *parser) peek() token {
	saved, cur, prev := *p.lx, p.tok, p.prev
	p.advance()
	t := p.tok
	*p.lx, p.tok, p.prev = saved, cur, prev
	return t
}

func (p *parser) expect(k tokKind, expected string) token {
	if p.tok.kind != k {
		p.failAt(p.tok, expected)
	}
	t := p.tok
	p.advance()
	return t
}

func (p *parser) isWord(w string) bool { return p.tok.kind == tIdent && p.tok.text == w }

func (p *parser) decl() Decl {
	switch {
	case p.isWord("interface"):
		return p.interfaceDecl()
	case p.isWord("node"):
		return p.nodeDecl()
	case p.isWord("edge"):
		return p.edgeDecl()
	}
	p.failAt(p.tok, "'interface', 'node' or 'edge'")
	return nil
}

func (p *parser) typeName(after string) TypeRef {
	t := p.expect(tTypeName, "type name (starting with an uppercase letter) "+after)
	return TypeRef{Name: t.text, Pos: t.pos}
}

func (p *parser) interfaceDecl() *InterfaceDecl {
	d := &InterfaceDecl{Pos: p.tok.pos}
	p.advance()
	n := p.typeName("after 'interface'")
	d.Name, d.NamePos = n.Name, n.Pos
	p.expect(tLBrace, "'{' after interface "+d.Name)
	for p.tok.kind != tRBrace {
		if p.tok.kind != tIdent {
			p.failAt(p.tok, "property or '}' in interface "+d.Name)
		}
		d.Properties = append(d.Properties, p.propDecl())
	}
	p.advance()
	return d
}

func (p *parser) nodeDecl() *NodeDecl {
	d := &NodeDecl{Pos: p.tok.pos}
	p.advance()
	n := p.typeName("after 'node'")
	d.Name, d.NamePos = n.Name, n.Pos
	d.Annotations = p.annotations()
	if p.isWord("implements") {
		p.advance()
		d.Implements = append(d.Implements, p.typeName("after 'implements'"))
		for p.tok.kind == tComma {
			p.advance()
			d.Implements = append(d.Implements, p.typeName("after ',' in implements list"))
		}
	}
	if p.tok.kind != tLBrace {
		exp := "'{' to open node " + d.Name
		if d.Implements == nil {
			exp = "annotation, 'implements' or " + exp
		}
		p.failAt(p.tok, exp)
	}
	p.advance()
	d.Properties, d.Constraints = p.body("node "+d.Name, true)
	return d
}

func (p *parser) edgeDecl() *EdgeDecl {
	d := &EdgeDecl{Pos: p.tok.pos}
	p.advance()
	n := p.typeName("after 'edge'")
	d.Name, d.NamePos = n.Name, n.Pos
	p.expect(tColon, "':' after edge name "+d.Name)
	d.From = p.typeName("(source node type) after ':'")
	p.expect(tArrow, "'->' between edge endpoints")
	d.To = p.typeName("(target node type) after '->'")
	if p.tok.kind == tAt {
		if nt := p.peek(); nt.kind == tIdent && nt.text == "card" && nt.off == p.tok.end {
			d.CardPos = p.tok.pos
			p.advance()
			p.advance()
			d.Card = p.cardinality()
		}
	}
	d.Annotations = p.annotations()
	if p.tok.kind == tLBrace {
		p.advance()
		d.Properties, d.Constraints = p.body("edge "+d.Name, false)
	}
	return d
}

// cardinality parses `(min..[max])` after `@card`.
func (p *parser) cardinality() Cardinality {
	p.expect(tLParen, "'(' after @card")
	parse := func(what string) (uint32, Pos) {
		t := p.tok
		if t.kind != tInt || t.text[0] == '-' {
			p.failAt(t, "non-negative integer "+what)
		}
		p.advance()
		v, ok := parseUint32(t.text)
		if !ok {
			p.semantic(t.pos, CodeInvalidCard, "invalid cardinality %s: %s (must fit in u32)", what, t.text)
		}
		return v, t.pos
	}
	var c Cardinality
	c.Min, _ = parse("@card minimum")
	p.expect(tDotDot, "'..' in @card(min..max)")
	if p.tok.kind != tRParen {
		hi, pos := parse("@card maximum")
		if c.Min > hi {
			p.semantic(pos, CodeInvalidCard, "cardinality min (%d) exceeds max (%d)", c.Min, hi)
		}
		c.Max = &hi
	}
	p.expect(tRParen, "')' to close @card")
	return c
}

func isConstraintName(s string) bool {
	switch ConstraintKind(s) {
	case KeyConstraint, UniqueConstraint, IndexConstraint, RangeConstraint, CheckConstraint:
		return true
	}
	return false
}

// atConstraint reports whether the input is `@ key|unique|index|range|check (`.
func (p *parser) atConstraint() bool {
	if p.tok.kind != tAt {
		return false
	}
	saved, cur, prev := *p.lx, p.tok, p.prev
	defer func() { *p.lx, p.tok, p.prev = saved, cur, prev }()
	p.advance()
	if p.tok.kind != tIdent || !isConstraintName(p.tok.text) {
		return false
	}
	p.advance()
	return p.tok.kind == tLParen
}

// body parses `(prop | bodyConstraint)* }` after the opening brace.
func (p *parser) body(owner string, node bool) ([]*PropDecl, []*Constraint) {
	var props []*PropDecl
	var cons []*Constraint
	for {
		switch {
		case p.tok.kind == tRBrace:
			p.advance()
			return props, cons
		case p.tok.kind == tIdent:
			props = append(props, p.propDecl())
		case p.atConstraint():
			cons = append(cons, p.bodyConstraint())
		default:
			p.failAt(p.tok, "property, body constraint or '}' in "+owner)
		}
	}
}

func (p *parser) propDecl() *PropDecl {
	name := p.tok
	p.advance()
	p.expect(tColon, "':' after property name "+name.text)
	d := &PropDecl{Pos: name.pos, Name: name.text, TypePos: p.tok.pos}
	d.Type = p.typeRef()
	d.Annotations = p.annotations()
	return d
}

func (p *parser) typeRef() PropType {
	var t PropType
	switch {
	case p.tok.kind == tLBrack:
		p.advance()
		el := p.tok
		if el.kind != tTypeName || el.text == "Vector" {
			p.failAt(el, "base type inside '[...]' (lists of enum or Vector are not allowed)")
		}
		t.Scalar = p.baseScalar(el)
		if t.Scalar == Blob {
			p.semantic(el.pos, CodeInvalidType, "list of Blob is not supported")
		}
		t.List = true
		p.advance()
		p.expect(tRBrack, "']' after list element type")
	case p.isWord("enum"):
		p.advance()
		t.Scalar, t.EnumValues = String, p.enumValues()
	case p.tok.kind == tTypeName && p.tok.text == "Vector":
		p.advance()
		p.expect(tLParen, "'(' after Vector")
		d := p.tok
		if d.kind != tInt || d.text[0] == '-' {
			p.failAt(d, "vector dimension (a positive integer)")
		}
		p.advance()
		v, err := strconv.ParseUint(d.text, 10, 32)
		switch {
		case err != nil:
			p.semantic(d.pos, CodeInvalidVector, "invalid Vector dimension: %s", d.text)
		case v == 0:
			p.semantic(d.pos, CodeInvalidVector, "Vector dimension must be greater than zero")
		case v > MaxVectorDim:
			p.semantic(d.pos, CodeInvalidVector, "Vector dimension %d exceeds maximum supported %d", v, MaxVectorDim)
		}
		t.Scalar, t.VectorDim = Vector, uint32(v)
		p.expect(tRParen, "')' after Vector dimension")
	case p.tok.kind == tTypeName:
		t.Scalar = p.baseScalar(p.tok)
		p.advance()
	default:
		p.failAt(p.tok, "property type")
	}
	if p.tok.kind == tQuestion {
		t.Nullable = true
		p.advance()
	}
	return t
}

func (p *parser) baseScalar(t token) Scalar {
	s, ok := baseScalars[t.text]
	if !ok {
		p.semantic(t.pos, CodeUnknownType, "unknown type '%s' (expected String, Blob, Bool, I32, I64, U32, U64, F32, F64, DateTime, Date, Vector(N), enum(...) or [T])", t.text)
	}
	return s
}

// enumValues parses `( v, v, … )`; values are returned sorted.
func (p *parser) enumValues() []string {
	if p.tok.kind != tLParen {
		p.failAt(p.tok, "'(' after enum")
	}
	var vals []string
	seen := map[string]bool{}
	for {
		// The lexer sits just past '(' or ','; scan the value in enum mode.
		t, ok, err := p.lx.nextEnumValue()
		if err != nil {
			p.fail(err)
		}
		if !ok {
			p.advance()
			p.failAt(p.tok, "enum value")
		}
		if seen[t.text] {
			p.semantic(t.pos, CodeInvalidEnum, "enum type cannot include duplicate values ('%s' repeats)", t.text)
		}
		seen[t.text] = true
		vals = append(vals, t.text)
		p.advance()
		if p.tok.kind == tRParen {
			break
		}
		if p.tok.kind != tComma {
			p.failAt(p.tok, "',' or ')' after enum values")
		}
	}
	p.advance()
	slices.Sort(vals)
	return vals
}

// annotations parses `@name[(...)]*`, stopping before a body constraint.
func (p *parser) annotations() []*Annotation {
	var out []*Annotation
	for p.tok.kind == tAt && !p.atConstraint() {
		at := p.tok
		a := &Annotation{Pos: p.tok.pos}
		p.advance()
		name := p.expect(tIdent, "annotation name after '@'")
		a.Name = name.text
		if p.tok.kind == tLParen {
			if a.Name == "card" {
				p.failAt(at, "annotation (@card(...) must directly follow an edge's endpoints)")
			}
			p.advance()
			v := p.annotationValue(p.tok, true)
			a.Value = &v
			for p.tok.kind == tComma {
				p.advance()
				k := p.expect(tIdent, "keyword argument name (name = literal)")
				p.expect(tEq, "'=' after keyword argument "+k.text)
				if a.Kwargs == nil {
					a.Kwargs, a.KwargPos = map[string]string{}, map[string]Pos{}
				}
				a.Kwargs[k.text] = p.annotationValue(p.tok, false)
				a.KwargPos[k.text] = k.pos
			}
			p.expect(tRParen, "')' or ',' in annotation arguments")
		}
		out = append(out, a)
	}
	return out
}

// annotationValue consumes a literal (or, positionally, an identifier) and
// returns its decoded text.
func (p *parser) annotationValue(t token, identOK bool) string {
	switch {
	case t.kind == tString:
		p.advance()
		s, err := decodeString(p.file, t)
		if err != nil {
			p.fail(err)
		}
		return s
	case (t.kind == tInt || t.kind == tFloat) && t.text[0] != '-',
		t.kind == tIdent && (identOK || t.text == "true" || t.text == "false"):
		p.advance()
		return t.text
	}
	if identOK {
		p.failAt(t, "annotation argument (string, number, boolean or identifier)")
	}
	p.failAt(t, "literal (string, number or boolean) as keyword argument value")
	return ""
}

// constraintArg is one parsed body-constraint argument.
type constraintArg struct {
	tok      token
	isRange  bool
	min, max *Bound
}

func (p *parser) bodyConstraint() *Constraint {
	c := &Constraint{Pos: p.tok.pos}
	p.advance()
	c.Kind = ConstraintKind(p.tok.text)
	p.advance()
	p.advance() // '('
	var args []constraintArg
	for {
		args = append(args, p.constraintArg())
		if p.tok.kind != tComma {
			break
		}
		p.advance()
	}
	closing := p.tok
	p.expect(tRParen, "')' or ',' in @"+string(c.Kind)+" arguments")
	ident := func(a constraintArg) (string, Pos) {
		if a.isRange || a.tok.kind != tIdent || a.tok.text == "true" || a.tok.text == "false" {
			p.failAt(a.tok, "property name in @"+string(c.Kind))
		}
		return a.tok.text, a.tok.pos
	}
	switch c.Kind {
	case KeyConstraint, UniqueConstraint, IndexConstraint:
		for _, a := range args {
			n, pos := ident(a)
			c.Columns, c.ColPos = append(c.Columns, n), append(c.ColPos, pos)
		}
		return c
	}
	if len(args) != 2 {
		if len(args) > 2 {
			p.failAt(args[2].tok, "')' after the two arguments of @"+string(c.Kind))
		}
		p.failAt(closing, "',' and a second argument: @range(prop, min..max) / @check(prop, \"regex\")")
	}
	c.Property, c.PropPos = ident(args[0])
	a := args[1]
	if c.Kind == RangeConstraint {
		if !a.isRange {
			p.failAt(a.tok, "range bounds (min..max, min.. or ..max) in @range")
		}
		if a.min == nil {
			p.semantic(a.tok.pos, CodeUnsupported, "@range with an open lower bound ('..max') is not supported: the reference engine records its single bound as the minimum; write an explicit minimum")
		}
		c.Min, c.Max = a.min, a.max
		return c
	}
	if a.isRange || a.tok.kind != tString {
		p.failAt(a.tok, "string pattern in @check")
	}
	s, err := decodeString(p.file, a.tok)
	if err != nil {
		p.fail(err)
	}
	c.Pattern = s
	return c
}

func isNum(t token) bool { return t.kind == tInt || t.kind == tFloat }

// bound converts a range-bound literal: an i64 when it fits, else an f64
// (as the reference does); a literal too large for an f64 is refused.
func (p *parser) bound(t token) *Bound {
	if t.kind == tInt {
		if v, err := strconv.ParseInt(t.text, 10, 64); err == nil {
			return &Bound{Int: v}
		}
	}
	f, err := strconv.ParseFloat(t.text, 64)
	if err != nil || math.IsInf(f, 0) {
		p.semantic(t.pos, CodeInvalidConstraint, "@range bound %s is out of range for a 64-bit float", truncate(t.text))
	}
	return &Bound{IsFloat: true, Float: f}
}

func (p *parser) constraintArg() constraintArg {
	t := p.tok
	switch {
	case t.kind == tDotDot:
		p.advance()
		if !isNum(p.tok) {
			p.failAt(p.tok, "number after '..'")
		}
		a := constraintArg{tok: t, isRange: true, max: p.bound(p.tok)}
		p.advance()
		return a
	case isNum(t):
		p.advance()
		if p.tok.kind != tDotDot {
			if t.text[0] == '-' {
				p.failAt(p.tok, "'..' after a negative range bound")
			}
			return constraintArg{tok: t}
		}
		p.advance()
		a := constraintArg{tok: t, isRange: true, min: p.bound(t)}
		if isNum(p.tok) {
			a.max = p.bound(p.tok)
			p.advance()
		}
		return a
	case t.kind == tString, t.kind == tIdent:
		p.advance()
		return constraintArg{tok: t}
	}
	p.failAt(t, "constraint argument (property name, literal or range)")
	return constraintArg{}
}
