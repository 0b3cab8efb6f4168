package pg

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseExamples(t *testing.T) {
	for _, f := range []string{"crm.pg", "telemetry.pg", "docs.pg", "example.pg"} {
		src, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(string(src)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseAST(t *testing.T) {
	src := `// header comment
interface Named { name: String @index }
/* block
   comment */ node Person @description("a \"person\"") implements Named {
    email: String @key
    age: I32? // trailing
    tags: [String]?
    emb: Vector(4)? @embed("email", model="m1")
    tier: enum(pro, free)
    @range(age, -1..150)
    @check(email, "^.+$")
}
edge Knows: Person -> Person @card(1..) @note(x, weight=2.5) { @unique(src, dst) }
edge Likes: Person -> Person`
	f, err := ParseFile("x.pg", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Decls) != 4 {
		t.Fatalf("%d decls", len(f.Decls))
	}
	n := f.Decls[1].(*NodeDecl)
	if n.Name != "Person" || n.Pos != (Pos{4, 15}) || len(n.Implements) != 1 || n.Implements[0].Name != "Named" {
		t.Fatalf("node %+v", n)
	}
	if a := n.Annotations[0]; a.Name != "description" || *a.Value != `a "person"` {
		t.Fatalf("annotation %+v", a)
	}
	want := []string{"String", "I32?", "[String]?", "Vector(4)?", "enum(free, pro)"}
	for i, p := range n.Properties {
		if p.Type.String() != want[i] {
			t.Errorf("prop %s type %s, want %s", p.Name, p.Type, want[i])
		}
	}
	if emb := n.Properties[3].Annotations[0]; emb.Kwargs["model"] != "m1" || *emb.Value != "email" {
		t.Errorf("embed %+v", emb)
	}
	r := n.Constraints[0]
	if r.Kind != RangeConstraint || r.Property != "age" || r.Min.Int != -1 || r.Max.Int != 150 || r.Pos != (Pos{10, 5}) {
		t.Errorf("range %+v", r)
	}
	if c := n.Constraints[1]; c.Kind != CheckConstraint || c.Pattern != "^.+$" {
		t.Errorf("check %+v", c)
	}
	e := f.Decls[2].(*EdgeDecl)
	if e.Card.Min != 1 || e.Card.Max != nil || e.From.Name != "Person" || len(e.Constraints) != 1 ||
		!slices.Equal(e.Constraints[0].Columns, []string{"src", "dst"}) || e.Annotations[0].Kwargs["weight"] != "2.5" {
		t.Errorf("edge %+v", e)
	}
	if l := f.Decls[3].(*EdgeDecl); l.Properties != nil || l.Card.Max != nil {
		t.Errorf("bodiless edge %+v", l)
	}
}

// Forms the reference grammar accepts that are easy to get wrong.
func TestParseAccepts(t *testing.T) {
	for _, src := range []string{
		"",
		"// only a comment",
		"node A { x: I32\n @ key(x) }", // whitespace after '@'
		"node A { x: String ? }",       // whitespace before '?'
		"node A{x:I32}node B{y:I32}edge E:A->B{}", // no whitespace at all
		"node A { t: enum(a//c\n, b) }",           // comment inside enum
		"node A { t: enum(-a, 1b, a-b_c) }",       // enum values may start with digits/'-'
		"node A { x: I32 @foo(1.5, k=true) }",     // literal args
		"node A { x: I32\n @range(x, 0 .. 5) }",   // spaces around '..'
		"node A { x: F64\n @range(x, -0.5..) }",   // open upper bound
		"interface I { x: I32 }\nnode A implements I, I {}",
		"node A { x: I32 @key @index }",
		"node A { node: I32 enum: String edge: Bool }", // keywords are ordinary property names
		"node A {}\nedge E: A -> A @card(0..0)",
		"node A { t: DateTime d: Date b: Bool u: U64 f: F32 }",
	} {
		if _, err := Compile(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestBoundLiterals(t *testing.T) {
	shape, err := Compile("node A { x: F64\n @range(x, 99999999999999999999..1.5) }")
	if err != nil {
		t.Fatal(err)
	}
	c := shape.Nodes[0].Constraints[0]
	if !c.Min.IsFloat || c.Min.Float != 1e20 || !c.Max.IsFloat || c.Max.Float != 1.5 {
		t.Fatalf("bounds %+v %+v", c.Min, c.Max)
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := Compile("node A { x: I32 }\nnode A { x: I32 }")
	var se *SemanticError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "schema.pg:2:6: duplicate node type A") {
		t.Fatalf("%T %v", err, err)
	}
}
