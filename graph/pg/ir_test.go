package pg

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// Hashes computed by the reference implementation (ModernRelay/omnigraph
// omnigraph-compiler at 62a9c3fe: compile_schema_shape + initialize_schema_ir
// with domain 01ARZ3NDEKTSV4RRFFQ69G5FAV) for these exact files.
var referenceHashes = []struct{ file, shape, ir string }{
	{"crm.pg", "sha256:4e0b3c93f2ceb5e01c9a10f23811c0ee2a7429605bd5b8979f0233a7950bd3ad", "sha256:08c81e733eb05f99462800894ec25dbda54557c803ab685ffa27b57697b3e80c"},
	{"telemetry.pg", "sha256:fa609c606ebc53150a326d03327ba5ad139b7edb68c5980806b4997dac9ebfd5", "sha256:cf325292441dac6fe9800dce393d7b084d085b924500d11f7a72686ba3a208fc"},
	{"docs.pg", "sha256:821cd68dc27edbfce4f35b2b6e35d5c358749960507daa5933a10aae75d0c769", "sha256:ce4c40fe9d2dc0b0e086c11e65eeb3878f92bdf65f18adc6fabe36a5b35b3c39"},
	{"example.pg", "sha256:70b6483f480cf72ca7c297fd8789f83f5c83bc3258f1d72e2c967d7a9c8a086e", "sha256:014ee1106ffff6b6d484c3d0de692675a4aea53b9f7363e0ad3cec5f1c47125b"},
	{"golden/kitchen_sink.pg", "sha256:e632fb01fa1d9e1164b9e3a60360792c7c74b875514519ca1843e188fefedc67", "sha256:8b4a2241ec2ccbf20026874edb455b847e8939655de5350b9fd30590021aea5c"},
	{"golden/literals.pg", "sha256:25c1606fe142125f161250923af011bfa23638ff97f5ad1813855561b261e60b", "sha256:a9da78dc337823fd33ce6141749d680e1f84561dca901f1101e4bef95d7710e6"},
	{"golden/interfaces.pg", "sha256:cc0366a6c596fed922d1be3de2d6211c17716b0c931f34b648154b5b9809fe47", "sha256:2bd041297cdb04657099558e36535cd19467d77d7a10752ab5541bcd51477b39"},
}

func TestReferenceHashes(t *testing.T) {
	for _, h := range referenceHashes {
		c := mustContract(t, h.file)
		if c.State.ShapeHash != h.shape || c.State.IRHash != h.ir {
			t.Errorf("%s: shape %s ir %s\nwant shape %s ir %s", h.file, c.State.ShapeHash, c.State.IRHash, h.shape, h.ir)
		}
		src, _ := os.ReadFile("testdata/" + h.file)
		if s, _ := Compile(string(src)); s.Hash() != h.shape {
			t.Errorf("%s: source shape hash %s", h.file, s.Hash())
		}
	}
}

// The pretty file is byte-identical to the reference's _schema.ir.json.
func TestPrettyIRMatchesReference(t *testing.T) {
	want, err := os.ReadFile("testdata/golden/telemetry.ir.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := mustContract(t, "telemetry.pg").IR.PrettyJSON(); got != string(want) {
		t.Errorf("pretty IR differs from the reference:\n%s", got)
	}
}

// Evolution cases checked against the reference's resolve_schema_ir.
func TestResolveMatchesReference(t *testing.T) {
	cases := []struct {
		n       string
		ir, err string
		diags   int
	}{
		{"1", "sha256:f50d7d0e2c260bee2194736a1974029b42bfdcde2a4991b8eb5ed14460d32416", "", 0},
		{"2", "sha256:6f923addefa4b0ebfa445bdb2c5517e8026948a5c7b59c9b5db2d2e0d30c52f0", "", 0},
		{"3", "", "property moves across stable owners are not supported", 0},
		{"4", "sha256:c01345bf46bef581aab97dc23ee727136e86e73efb4f7bcdba01be48ac69fe14", "", 2},
		{"5", "", "no accepted property with that name exists under the stable owner", 0},
	}
	for _, c := range cases {
		accepted := mustContract(t, "evolve/case"+c.n+".accepted.pg").IR
		src, _ := os.ReadFile("testdata/evolve/case" + c.n + ".desired.pg")
		shape, err := Compile(string(src))
		if err != nil {
			t.Fatal(err)
		}
		ir, diags, err := Resolve(accepted, shape)
		if c.err != "" {
			var ie *IdentityError
			if !errors.As(err, &ie) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("case %s: want error %q, got %v", c.n, c.err, err)
			}
			continue
		}
		if err != nil || ir.Hash() != c.ir || len(diags) != c.diags {
			t.Errorf("case %s: %v %s %v", c.n, err, ir.Hash(), diags)
		}
	}
}

func initIR(t *testing.T, src string) *SchemaIR {
	t.Helper()
	shape, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	ir, _, err := Initialize(testDomain, shape)
	if err != nil {
		t.Fatal(err)
	}
	return ir
}

// Types by (kind, name) with interfaces < nodes < edges, then properties by
// (owner id, name), then incarnations by type id, from one shared counter.
func TestAllocationOrder(t *testing.T) {
	left := initIR(t, "interface Z { p: String }\nnode B implements Z {}\nnode A {}\nedge E: A -> B {}")
	right := initIR(t, "edge E: A -> B {}\nnode A {}\nnode B implements Z {}\ninterface Z { p: String }")
	if left.CompactJSON() != right.CompactJSON() {
		t.Fatal("declaration order changed the IR")
	}
	got := []uint64{left.Interfaces[0].TypeID, left.Nodes[0].TypeID, left.Nodes[1].TypeID, left.Edges[0].TypeID,
		left.Interfaces[0].Properties[0].PropertyID, left.Nodes[1].Properties[0].PropertyID,
		left.Nodes[0].IncarnationID, left.Nodes[1].IncarnationID, left.Edges[0].IncarnationID, left.NextIdentityID}
	for i, want := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} {
		if got[i] != want {
			t.Fatalf("ids %v", got)
		}
	}
}

func TestRenameAndDropReAdd(t *testing.T) {
	accepted := initIR(t, "node Person { name: String age: I32? }")
	shape, _ := Compile(`node Human @rename_from("Person") { full_name: String @rename_from("name") age: I32? }`)
	ir, _, err := Resolve(accepted, shape)
	if err != nil {
		t.Fatal(err)
	}
	a, r := accepted.Nodes[0], ir.Nodes[0]
	if a.TypeID != r.TypeID || a.IncarnationID != r.IncarnationID || ir.NextIdentityID != accepted.NextIdentityID ||
		a.Properties[1].PropertyID != r.Properties[1].PropertyID || r.Properties[1].Name != "full_name" {
		t.Fatalf("rename lost identities: %s", ir.CompactJSON())
	}
	empty, _, err := Resolve(accepted, &Shape{})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Compile("node Person { name: String age: I32? }")
	readded, _, err := Resolve(empty, again)
	if err != nil {
		t.Fatal(err)
	}
	if readded.Nodes[0].TypeID == a.TypeID || readded.Nodes[0].IncarnationID == a.IncarnationID ||
		readded.Nodes[0].Properties[0].PropertyID == a.Properties[0].PropertyID {
		t.Fatal("drop + re-add reused an identity")
	}
	cross, _ := Compile(`node B { q: String } edge E: B -> B @rename_from("Person") {}`)
	if _, _, err := Resolve(accepted, cross); err == nil || !strings.Contains(err.Error(), "across declaration kinds") {
		t.Fatalf("cross-kind rename: %v", err)
	}
}

func TestHashIgnoresFormattingCommentsAndOrder(t *testing.T) {
	base := mustContract(t, "crm.pg")
	reordered := `// same schema, different layout
edge Knows: Person -> Person { @unique(dst, src) weight: F32? }
edge EmployedBy : Person->Org @card( 0 .. 1 ) { title: String? /* c */ since: Date? }
node Person implements Named { @check(email, "^[^@ ]+@[^@ ]+$") @range(age, 0..150)
  joined_at: DateTime age: I32? email: String @key }
node Org implements Named { tags: [String]? founded: Date? tier: enum(pro, enterprise, free)
  domain: String? @unique slug: String @key }
interface Named { name: String @index }`
	c, err := InitContract(reordered, testDomain)
	if err != nil {
		t.Fatal(err)
	}
	if c.State.ShapeHash != base.State.ShapeHash || c.State.IRHash != base.State.IRHash {
		t.Fatal("layout/comment/order change altered the hashes")
	}
	// Rename hints are excluded from the shape hash.
	hinted, _ := Compile(`node Person @rename_from("P") { name: String @key @rename_from("n") age: I32? }`)
	plain, _ := Compile("node Person { age: I32?\n name: String @key }")
	if hinted.Hash() != plain.Hash() {
		t.Fatal("rename hints changed the shape hash")
	}
}

func TestHashChangesWithSchema(t *testing.T) {
	base := "node A { x: I32 t: enum(a, b) }\nedge E: A -> A @card(0..1)"
	seen := map[string]string{}
	for _, src := range []string{base,
		"node A { x: I32? t: enum(a, b) }\nedge E: A -> A @card(0..1)",
		"node A { x: I64 t: enum(a, b) }\nedge E: A -> A @card(0..1)",
		"node A { x: I32 t: enum(a, b, c) }\nedge E: A -> A @card(0..1)",
		"node A { x: I32 t: enum(a, b) }\nedge E: A -> A @card(1..1)",
		"node A { x: I32 @index t: enum(a, b) }\nedge E: A -> A @card(0..1)",
		"node A { x: I32 t: enum(a, b) y: [String] }\nedge E: A -> A @card(0..1)",
		"node A @description(\"d\") { x: I32 t: enum(a, b) }\nedge E: A -> A @card(0..1)",
	} {
		shape, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		ir, _, _ := Initialize(testDomain, shape)
		if prev, dup := seen[ir.Hash()]; dup {
			t.Errorf("same hash for\n%s\n%s", prev, src)
		}
		seen[ir.Hash()] = src
	}
	other := "01BX5ZZKBKACTAV9WEVGEMMVRZ"
	s, _ := Compile(base)
	a, _, _ := Initialize(testDomain, s)
	b, _, _ := Initialize(other, s)
	if a.Hash() == b.Hash() || a.Shape().Hash() != b.Shape().Hash() {
		t.Error("the IR hash must depend on the domain, the shape hash must not")
	}
}

func TestIRRoundTripAndContract(t *testing.T) {
	for _, h := range referenceHashes {
		c := mustContract(t, h.file)
		files := c.Files()
		ir, err := ParseSchemaIR([]byte(files[SchemaIRFile]))
		if err != nil {
			t.Fatal(h.file, err)
		}
		if ir.CompactJSON() != c.IR.CompactJSON() || ir.Hash() != h.ir {
			t.Fatalf("%s: IR did not round-trip", h.file)
		}
		opened, err := OpenContract(files[SchemaSourceFile], []byte(files[SchemaIRFile]), []byte(files[SchemaStateFile]))
		if err != nil || opened.State.IRHash != h.ir {
			t.Fatalf("%s: open: %v", h.file, err)
		}
	}
	c := mustContract(t, "telemetry.pg")
	f := c.Files()
	tampered := strings.Replace(f[SchemaIRFile], `"name": "message"`, `"name": "msg"`, 1)
	if _, err := OpenContract(f[SchemaSourceFile], []byte(tampered), []byte(f[SchemaStateFile])); err == nil {
		t.Error("tampered IR accepted")
	}
	if _, err := OpenContract(f[SchemaSourceFile]+"\nnode Extra {}", []byte(f[SchemaIRFile]), []byte(f[SchemaStateFile])); err == nil {
		t.Error("drifted source accepted")
	}
	if _, err := OpenContract(f[SchemaSourceFile]+"\n// only a comment", []byte(f[SchemaIRFile]), []byte(f[SchemaStateFile])); err != nil {
		t.Errorf("comment-only edit refused: %v", err)
	}
}

func TestStateJSON(t *testing.T) {
	c := mustContract(t, "telemetry.pg")
	want := `{
  "format_version": 2,
  "schema_shape_hash": "sha256:fa609c606ebc53150a326d03327ba5ad139b7edb68c5980806b4997dac9ebfd5",
  "schema_ir_hash": "sha256:cf325292441dac6fe9800dce393d7b084d085b924500d11f7a72686ba3a208fc",
  "schema_identity_version": 2,
  "schema_identity_domain": "01ARZ3NDEKTSV4RRFFQ69G5FAV"
}`
	if got := c.State.JSON(); got != want {
		t.Fatalf("state:\n%s", got)
	}
	s, err := ParseSchemaState([]byte(want))
	if err != nil || *s != *c.State {
		t.Fatalf("parse state: %v %+v", err, s)
	}
	if _, err := ParseSchemaState([]byte(strings.Replace(want, `"format_version": 2`, `"format_version": 1`, 1))); err == nil {
		t.Error("format 1 accepted")
	}
}

func TestValidateRejects(t *testing.T) {
	mutate := []func(*SchemaIR){
		func(ir *SchemaIR) { ir.Nodes[0].Properties[0].PropertyID = ir.Nodes[0].TypeID },
		func(ir *SchemaIR) { ir.NextIdentityID = ir.Nodes[0].TypeID },
		func(ir *SchemaIR) { ir.IRVersion = 1 },
		func(ir *SchemaIR) { ir.Domain = strings.ToLower(ir.Domain) },
		func(ir *SchemaIR) { ir.Nodes[0].Properties[0].Name = "_rowid" },
		func(ir *SchemaIR) {
			ir.Nodes[0].Properties[0], ir.Nodes[0].Properties[1] = ir.Nodes[0].Properties[1], ir.Nodes[0].Properties[0]
		},
		func(ir *SchemaIR) { ir.Edges[0].From.Name = "Nope" },
	}
	for i, m := range mutate {
		ir := initIR(t, "node A { p: String q: I32 }\nedge E: A -> A")
		m(ir)
		var ie *IdentityError
		if err := ir.Validate(); !errors.As(err, &ie) || !ie.InvalidIR {
			t.Errorf("mutation %d: %v", i, err)
		}
	}
}

func TestDomain(t *testing.T) {
	d := NewIdentityDomain()
	if err := checkDomain(d); err != nil || len(d) != 26 {
		t.Fatalf("domain %q: %v", d, err)
	}
	shape, _ := Compile("node A {}")
	if _, _, err := Initialize(strings.ToLower(testDomain), shape); err == nil {
		t.Fatal("lowercase domain accepted")
	}
	c, err := InitContract("node A {}", "")
	if err != nil || c.IR.Domain == "" {
		t.Fatal(err)
	}
}
