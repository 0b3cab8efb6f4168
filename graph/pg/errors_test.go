package pg

import (
	"errors"
	"testing"
)

// Every syntax error is a *ParseError with an exact position and message.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, src string
		line, col int
		msg       string
	}{
		{"enum close", "node A {\n  tier: enum(a, b}\n}", 2, 18,
			"expected ',' or ')' after enum values, found '}'"},
		{"empty enum", "node A { t: enum() }", 1, 18, "expected enum value, found ')'"},
		{"enum missing paren", "node A { t: enum a }", 1, 18, "expected '(' after enum, found 'a'"},
		{"hash comment", "# hi\nnode A {}", 1, 1,
			"expected 'interface', 'node' or 'edge' ('#' does not start a comment; use // or /* */), found '#'"},
		{"top level junk", "node A {}\nfoo", 2, 1, "expected 'interface', 'node' or 'edge', found 'foo'"},
		{"lowercase type name", "node person {}", 1, 6,
			"expected type name (starting with an uppercase letter) after 'node', found 'person'"},
		{"missing brace", "node A\n  x: I32\n}", 2, 3,
			"expected annotation, 'implements' or '{' to open node A, found 'x'"},
		{"unclosed node", "node A {\n  x: I32\n", 3, 1,
			"expected property, body constraint or '}' in node A, found end of input"},
		{"missing colon", "node A { x I32 }", 1, 12, "expected ':' after property name x, found 'I32'"},
		{"missing type", "node A { x: }", 1, 13, "expected property type, found '}'"},
		{"unterminated block comment", "node A {} /* never\nclosed", 1, 11,
			"expected '*/' to close the block comment, found end of input"},
		{"unterminated string", "node A { x: I32 @description(\"abc }", 1, 30,
			"expected '\"' to close the string literal, found end of input"},
		{"body constraint in header", "node A @key(x) { x: I32 }", 1, 8,
			"expected annotation, 'implements' or '{' to open node A, found '@key'"},
		{"card after annotation", "node A {}\nedge E: A -> A @description(\"d\") @card(0..1)", 2, 34,
			"expected annotation (@card(...) must directly follow an edge's endpoints), found '@card'"},
		{"card float", "node A {}\nedge E: A -> A @card(0.5..1)", 2, 22,
			"expected non-negative integer @card minimum, found number 0.5"},
		{"card missing dots", "node A {}\nedge E: A -> A @card(1)", 2, 23, "expected '..' in @card(min..max), found ')'"},
		{"edge arrow", "node A {}\nedge E: A => A", 2, 11, "expected '->' between edge endpoints, found '='"},
		{"edge colon", "node A {}\nedge E A -> A", 2, 8, "expected ':' after edge name E, found 'A'"},
		{"interface constraint", "interface I {\n  @key(x)\n}", 2, 3, "expected property or '}' in interface I, found '@key'"},
		{"list of vector", "node A { v: [Vector(3)] }", 1, 14,
			"expected base type inside '[...]' (lists of enum or Vector are not allowed), found 'Vector'"},
		{"list of enum", "node A { v: [enum(a)] }", 1, 14,
			"expected base type inside '[...]' (lists of enum or Vector are not allowed), found 'enum'"},
		{"list close", "node A { v: [I32 }", 1, 18, "expected ']' after list element type, found '}'"},
		{"vector negative", "node A { v: Vector(-3) }", 1, 20,
			"expected vector dimension (a positive integer), found number -3"},
		{"key literal arg", "node A {\n  x: I32\n  @key(\"x\")\n}", 3, 8,
			"expected property name in @key, found string \"x\""},
		{"key bool arg", "node A {\n  x: I32\n  @unique(true)\n}", 3, 11,
			"expected property name in @unique, found 'true'"},
		{"range without bounds", "node A {\n  x: I32\n  @range(x, 5)\n}", 3, 13,
			"expected range bounds (min..max, min.. or ..max) in @range, found number 5"},
		{"range one arg", "node A {\n  x: I32\n  @range(x)\n}", 3, 11,
			"expected ',' and a second argument: @range(prop, min..max) / @check(prop, \"regex\"), found ')'"},
		{"range extra arg", "node A {\n  x: I32\n  @range(x, 0..1, y)\n}", 3, 19,
			"expected ')' after the two arguments of @range, found 'y'"},
		{"check ident pattern", "node A {\n  x: String\n  @check(x, y)\n}", 3, 13,
			"expected string pattern in @check, found 'y'"},
		{"annotation positional then positional", "node A { x: I32 @foo(a, b) }", 1, 26,
			"expected '=' after keyword argument b, found ')'"},
		{"kwarg ident value", "node A { x: I32 @foo(a, k = v) }", 1, 29,
			"expected literal (string, number or boolean) as keyword argument value, found 'v'"},
		{"annotation type-name arg", "node A @rename_from(Old) {}", 1, 21,
			"expected annotation argument (string, number, boolean or identifier), found 'Old'"},
		{"non-ascii identifier", "node A { é: I32 }", 1, 10, "expected property, body constraint or '}' in node A, found 'é'"},
		{"column counts code points", "node A { /* é */ x I32 }", 1, 20, "expected ':' after property name x, found 'I32'"},
		{"negative outside range", "node A { x: I32 @foo(-1) }", 1, 22,
			"expected annotation argument (string, number, boolean or identifier), found number -1"},
		{"negative without dots", "node A {\n  x: I32\n  @range(x, -1)\n}", 3, 15, "expected '..' after a negative range bound, found ')'"},
		{"property index with value is a body constraint", "node A { x: I32 @index(\"btree\") }", 1, 24,
			"expected property name in @index, found string \"btree\""},
		{"invalid utf8", "node A {}\nnode \xff {}", 2, 6, "expected UTF-8 text, found invalid byte 0xff"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseFile("s.pg", c.src)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("want *ParseError, got %T %v", err, err)
			}
			if pe.Line != c.line || pe.Column != c.col {
				t.Errorf("position %d:%d, want %d:%d (%v)", pe.Line, pe.Column, c.line, c.col, err)
			}
			want := "s.pg:" + itoa(c.line) + ":" + itoa(c.col) + ": " + c.msg
			if err.Error() != want {
				t.Errorf("message\n got %q\nwant %q", err.Error(), want)
			}
		})
	}
}

func itoa(i int) string { return Pos{Line: i}.String()[:len(Pos{Line: i}.String())-2] }

func TestParseErrorDefaultFileName(t *testing.T) {
	_, err := Parse("node A {\n  tier: enum(free, pro}\n}")
	if err == nil || err.Error() != "schema.pg:2:23: expected ',' or ')' after enum values, found '}'" {
		t.Fatalf("got %v", err)
	}
	pe := err.(*ParseError)
	if pe.Expected != "',' or ')' after enum values" || pe.Found != "'}'" {
		t.Fatalf("fields: %+v", pe)
	}
}

// Every rule violation of a well-formed schema is a *SemanticError with a
// code and the position of the offending construct.
func TestSemanticErrors(t *testing.T) {
	cases := []struct {
		name, src string
		code      Code
		line, col int
	}{
		{"unknown type", "node A {\n  x: Strin\n}", CodeUnknownType, 2, 6},
		{"unknown list element", "node A { x: [Text] }", CodeUnknownType, 1, 14},
		{"duplicate node", "node A { x: I32 }\nnode A { y: I32 }", CodeDuplicateType, 2, 6},
		{"duplicate interface", "interface I {}\ninterface I {}", CodeDuplicateType, 2, 11},
		{"duplicate edge", "node A {}\nedge E: A -> A\nedge E: A -> A", CodeDuplicateType, 3, 6},
		{"edge case collision", "node A {}\nedge Knows: A -> A\nedge KNOWS: A -> A", CodeEdgeNameCollision, 3, 6},
		{"duplicate property", "node A {\n  x: I32\n  x: I64\n}", CodeDuplicateProperty, 3, 3},
		{"reserved storage column", "node A { _rowid: I64 }", CodeReservedName, 1, 10},
		{"reserved id", "node A { id: String }", CodeReservedName, 1, 10},
		{"reserved src on edge", "node A {}\nedge E: A -> A { src: String }", CodeReservedName, 2, 18},
		{"unknown interface", "node A implements Nope {}", CodeUnknownInterface, 1, 19},
		{"unknown source endpoint", "node B {}\nedge E: A -> B", CodeUnknownEndpoint, 2, 9},
		{"unknown target endpoint", "node A {}\nedge E: A -> B", CodeUnknownEndpoint, 2, 14},
		{"interface endpoint", "interface I {}\nnode A {}\nedge E: A -> I", CodeUnknownEndpoint, 3, 14},
		{"key on optional", "node A {\n  x: String? @key\n}", CodeInvalidKey, 2, 14},
		{"body key on optional", "node A {\n  a: String\n  b: I32?\n  @key(a, b)\n}", CodeInvalidKey, 4, 11},
		{"key on list", "node A { x: [String] @key }", CodeInvalidKey, 1, 22},
		{"key on vector", "node A {\n  v: Vector(3)\n  @key(v)\n}", CodeInvalidKey, 3, 8},
		{"key on blob", "node A { b: Blob @key }", CodeInvalidKey, 1, 18},
		{"two keys", "node A {\n  a: String @key\n  b: String\n  @key(b)\n}", CodeInvalidKey, 4, 3},
		{"key on edge", "node A {}\nedge E: A -> A {\n  w: I32\n  @key(w)\n}", CodeInvalidKey, 4, 3},
		{"key property on edge", "node A {}\nedge E: A -> A { w: I32 @key }", CodeInvalidKey, 2, 25},
		{"key unknown property", "node A {\n  a: String\n  @key(b)\n}", CodeUnknownProperty, 3, 8},
		{"unique unknown", "node A {\n  a: String\n  @unique(a, zz)\n}", CodeUnknownProperty, 3, 14},
		{"range unknown", "node A {\n  @range(age, 0..1)\n}", CodeUnknownProperty, 2, 10},
		{"interface type conflict", "interface I { n: I32 }\nnode A implements I {\n  n: String\n}", CodeInterfaceConflict, 3, 6},
		{"two interfaces conflict", "interface I { n: I32 }\ninterface J { n: I64 }\nnode A implements I, J {}", CodeInterfaceConflict, 3, 22},
		{"two interfaces semantics", "interface I { n: I32 @index }\ninterface J { n: I32 }\nnode A implements I, J {}", CodeInterfaceConflict, 3, 22},
		{"vector zero", "node A { v: Vector(0) }", CodeInvalidVector, 1, 20},
		{"vector too large", "node A { v: Vector(2147483648) }", CodeInvalidVector, 1, 20},
		{"vector overflow", "node A { v: Vector(99999999999) }", CodeInvalidVector, 1, 20},
		{"card min > max", "node A {}\nedge E: A -> A @card(3..1)", CodeInvalidCard, 2, 25},
		{"card overflow", "node A {}\nedge E: A -> A @card(0..4294967296)", CodeInvalidCard, 2, 25},
		{"duplicate enum value", "node A { t: enum(a, b, a) }", CodeInvalidEnum, 1, 24},
		{"list of blob", "node A { t: [Blob] }", CodeInvalidType, 1, 14},
		{"bad escape", "node A @description(\"a\\qb\") {}", CodeInvalidString, 1, 23},
		{"range on string", "node A {\n  s: String\n  @range(s, 0..1)\n}", CodeInvalidConstraint, 3, 10},
		{"check on int", "node A {\n  s: I32\n  @check(s, \"x\")\n}", CodeInvalidConstraint, 3, 10},
		{"range on edge", "node A {}\nedge E: A -> A {\n  w: I32\n  @range(w, 0..1)\n}", CodeInvalidConstraint, 4, 3},
		{"unique on blob", "node A {\n  b: Blob\n  @unique(b)\n}", CodeInvalidConstraint, 3, 11},
		{"open lower range", "node A {\n  x: I32\n  @range(x, ..10)\n}", CodeUnsupported, 3, 13},
		{"huge float bound", "node A {\n  x: F64\n  @range(x, 0.." + string(make([]byte, 0)) + "1" + repeat("0", 400) + ")\n}", CodeInvalidConstraint, 3, 16},
		{"index on list", "node A { t: [String] @index }", CodeInvalidAnnotation, 1, 22},
		{"unique on vector", "node A { v: Vector(2) @unique }", CodeInvalidAnnotation, 1, 23},
		{"index twice", "node A { x: I32 @index @index }", CodeInvalidAnnotation, 1, 24},
		{"embed on string", "node A { x: String @embed(\"x\") }", CodeInvalidAnnotation, 1, 20},
		{"embed unknown source", "node A { v: Vector(2) @embed(\"body\") }", CodeUnknownProperty, 1, 23},
		{"embed non-string source", "node A {\n  n: I32\n  v: Vector(2) @embed(\"n\")\n}", CodeInvalidAnnotation, 3, 16},
		{"embed bad kwarg", "node A {\n  b: String\n  v: Vector(2) @embed(\"b\", provider=\"x\")\n}", CodeInvalidAnnotation, 3, 28},
		{"embed on edge", "node A {}\nedge E: A -> A {\n  b: String\n  v: Vector(2) @embed(\"b\")\n}", CodeInvalidAnnotation, 4, 16},
		{"node-level index", "node A @index {}", CodeInvalidAnnotation, 1, 8},
		{"edge-level unique", "node A {}\nedge E: A -> A @unique", CodeInvalidAnnotation, 2, 16},
		{"description twice", "node A @description(\"a\") @description(\"b\") {}", CodeInvalidAnnotation, 1, 26},
		{"empty description", "node A @description(\"  \") {}", CodeInvalidAnnotation, 1, 8},
		{"instruction on property", "node A { x: I32 @instruction(\"do\") }", CodeInvalidAnnotation, 1, 17},
		{"rename_from twice", "node A @rename_from(\"B\") @rename_from(\"C\") {}", CodeInvalidAnnotation, 1, 26},
		{"rename_from kwargs", "node A { x: I32 @rename_from(\"y\", why=\"z\") }", CodeInvalidAnnotation, 1, 17},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CompileFile("s.pg", c.src)
			var se *SemanticError
			if !errors.As(err, &se) {
				t.Fatalf("want *SemanticError, got %T %v", err, err)
			}
			if se.Code != c.code || se.Line != c.line || se.Column != c.col {
				t.Errorf("got %s at %d:%d (%v), want %s at %d:%d", se.Code, se.Line, se.Column, err, c.code, c.line, c.col)
			}
		})
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
