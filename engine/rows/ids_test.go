package rows

import (
	"fmt"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// Canonical @key ids for every key type (docs/omnigraph-format.md §5.3).
func TestCanonicalIDs(t *testing.T) {
	cases := []struct {
		typ, value, want string
	}{
		{"String", `"a,b \"c\" ü"`, `a,b "c" ü`},
		{"enum(x, y)", `"y"`, `y`},
		{"Bool", `true`, `true`},
		{"Bool", `false`, `false`},
		{"I32", `-2147483648`, `-2147483648`},
		{"I64", `9223372036854775807`, `9223372036854775807`},
		{"I64", `-9007199254740993`, `-9007199254740993`},
		{"U32", `4294967295`, `4294967295`},
		{"U64", `18446744073709551615`, `18446744073709551615`},
		{"Date", `"2024-01-01"`, `19723`},
		{"Date", `19723`, `19723`},
		{"Date", `"1969-12-31"`, `-1`},
		{"DateTime", `"2024-01-01T00:00:00Z"`, `1704067200000`},
		{"DateTime", `1704067200000`, `1704067200000`},
		{"F32", `0.1`, `0.1`},
		{"F32", `-0.0`, `0`},
		{"F32", `0`, `0`},
		{"F32", `1e20`, `100000000000000000000`},
		{"F32", `16777217`, `16777216`},
		{"F32", `3.4028235e38`, `340282350000000000000000000000000000000`},
		{"F32", `1e-45`, `0.000000000000000000000000000000000000000000001`},
		{"F64", `0.1`, `0.1`},
		{"F64", `-0.0`, `0`},
		{"F64", `1e21`, `1000000000000000000000`},
		{"F64", `-2.5e-7`, `-0.00000025`},
		{"F64", `123456789012345680000`, `123456789012345680000`},
	}
	for _, c := range cases {
		t.Run(c.typ+"="+c.value, func(t *testing.T) {
			src := fmt.Sprintf("node K { k: %s @key }", c.typ)
			out := mustRun(t, src, Merge, `{"type":"K","data":{"k":`+c.value+`}}`)
			if got := out["node:K"].IDs[0]; got != c.want {
				t.Fatalf("id %q, want %q", got, c.want)
			}
			if got := colJSON(t, out["node:K"], "id")[0]; got != quote(c.want) {
				t.Fatalf("id column %s", got)
			}
			// The canonical id may be supplied; anything else is refused.
			mustRun(t, src, Append, fmt.Sprintf(`{"type":"K","data":{"id":%s,"k":%s}}`, quote(c.want), c.value))
		})
	}
}

func quote(s string) string { return string(framing.AppendJSONString(nil, s)) }

// Composite ids: JSON array of member strings ordered by stable property id.
func TestCompositeIDs(t *testing.T) {
	const src = "node Slot { tenant: String\n slot: I32\n @key(tenant, slot) }"
	out := mustRun(t, src, Merge,
		`{"type":"Slot","data":{"tenant":"acme","slot":7}}`,
		`{"type":"Slot","data":{"tenant":"a\"b,c ü\u0001","slot":-1}}`)
	ids := out["node:Slot"].IDs
	if ids[0] != `["7","acme"]` {
		t.Fatalf("id %s", ids[0])
	}
	if ids[1] != `["-1","a\"b,c ü\u0001"]` {
		t.Fatalf("id %s", ids[1])
	}
	// Supplying the canonical id is accepted; a non-canonical spelling is refused.
	mustRun(t, src, Append, `{"type":"Slot","data":{"id":"[\"7\",\"acme\"]","tenant":"acme","slot":7}}`)
	_, err := run(t, src, Append, Options{}, `{"type":"Slot","data":{"id":"[\"acme\",\"7\"]","tenant":"acme","slot":7}}`)
	wantInvalid(t, err, 1, "data.id", `node Slot explicit id '["acme","7"]' does not match its canonical @key id '["7","acme"]'`)
	_, err = run(t, src, Append, Options{}, `{"type":"Slot","data":{"id":"[\"7\", \"acme\"]","tenant":"acme","slot":7}}`)
	wantInvalid(t, err, 1, "data.id", `node Slot explicit id '["7", "acme"]' does not match its canonical @key id '["7","acme"]'`)

	// The bundled telemetry example schema: Sensor site "ams1", serial 42 → ["42","ams1"].
	tel := graphtest.Schema(t, "telemetry.pg")
	out = mustRun(t, tel, Merge, `{"type":"Sensor","data":{"site":"ams1","serial":42,"model":"T9","installed":"2026-05-01"}}`)
	if got := out["node:Sensor"].IDs[0]; got != `["42","ams1"]` {
		t.Fatalf("sensor id %s", got)
	}
}

// The tuple follows stable property ids, not names: a property added later sorts last.
func TestCompositeOrderFollowsPropertyIDs(t *testing.T) {
	v1, err := pg.InitContract("node T { zeta: String\n name: String }", testDomain)
	if err != nil {
		t.Fatal(err)
	}
	shape, err := pg.Compile("node T { zeta: String\n name: String\n alpha: I32\n @key(zeta, alpha) }")
	if err != nil {
		t.Fatal(err)
	}
	ir, _, err := pg.Resolve(v1.IR, shape)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pg.NewCatalog(ir)
	if err != nil {
		t.Fatal(err)
	}
	if k := cat.Node("T").Key; len(k) != 2 || k[0] != "zeta" || k[1] != "alpha" {
		t.Fatalf("key order %v (want zeta before alpha by property id)", k)
	}
	out, err := runRecs(t, cat, Merge, Options{}, parse(t, `{"type":"T","data":{"zeta":"z","name":"n","alpha":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := out["node:T"].IDs[0]; got != `["z","1"]` {
		t.Fatalf("id %s", got)
	}
}

func TestKeyMissingAndMismatch(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	_, err := run(t, crm, Merge, Options{}, `{"type":"Person","data":{"name":"A","joined_at":0}}`)
	wantInvalid(t, err, 1, "data.email", `node Person is missing a non-null @key value`)
	_, err = run(t, crm, Merge, Options{}, `{"type":"Person","data":{"name":"A","email":null,"joined_at":0}}`)
	wantInvalid(t, err, 1, "data.email", `node Person is missing a non-null @key value`)
	_, err = run(t, crm, Merge, Options{}, `{"type":"Person","data":{"id":"a@x.io ","name":"A","email":"a@x.io","joined_at":0}}`)
	wantInvalid(t, err, 1, "data.id", `node Person explicit id 'a@x.io ' does not match its canonical @key id 'a@x.io'`)
	_, err = run(t, "node K { k: Date @key }", Merge, Options{}, `{"type":"K","data":{"id":"2024-01-01","k":"2024-01-01"}}`)
	wantInvalid(t, err, 1, "data.id", `node K explicit id '2024-01-01' does not match its canonical @key id '19723'`)
}

// Non-keyed nodes and edges keep a supplied id verbatim and otherwise get NewID().
func TestSuppliedAndGeneratedIDs(t *testing.T) {
	out := mustRun(t, allTypes, Append,
		`{"type":"Free","data":{"id":" x ","n":1}}`,
		`{"type":"Free","data":{"n":2}}`,
		`{"edge":"Loose","from":" x ","to":"gen-0001"}`,
		`{"edge":"Loose","from":"a","to":"b","data":{"id":""}}`)
	if ids := out["node:Free"].IDs; ids[0] != " x " || ids[1] != "gen-0001" {
		t.Fatalf("node ids %q", ids)
	}
	e := out["edge:Loose"]
	if e.IDs[0] != "gen-0002" || e.IDs[1] != "" || e.Src[0] != " x " || e.Dst[0] != "gen-0001" || e.Src[1] != "a" || e.Dst[1] != "b" {
		t.Fatalf("edge ids %q src %q dst %q", e.IDs, e.Src, e.Dst)
	}
	if got := colJSON(t, e, "src"); got[0] != `" x "` || got[1] != `"a"` {
		t.Fatalf("src column %v", got)
	}
	// Without NewID, a ULID is minted.
	b, err := Build(catalog(t, allTypes), parse(t, `{"type":"Free","data":{}}`), Merge, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b["node:Free"].Release()
	if id := b["node:Free"].IDs[0]; len(id) != 26 {
		t.Fatalf("generated id %q is not a ULID", id)
	}
}

func TestCanonicalScalar(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	fb := array.NewFloat32Builder(mem)
	fb.AppendValues([]float32{float32(math.Inf(1)), float32(math.NaN()), 1.5}, nil)
	fb.AppendNull()
	fa := fb.NewArray()
	defer fa.Release()
	fb.Release()
	if _, _, err := CanonicalScalar(fa, 0); err == nil || err.Error() != "scalar key: non-finite Float32 value inf cannot identify an entity" {
		t.Fatalf("inf: %v", err)
	}
	if _, _, err := CanonicalScalar(fa, 1); err == nil || err.Error() != "scalar key: non-finite Float32 value NaN cannot identify an entity" {
		t.Fatalf("NaN: %v", err)
	}
	if s, ok, err := CanonicalScalar(fa, 2); s != "1.5" || !ok || err != nil {
		t.Fatalf("1.5: %q %v %v", s, ok, err)
	}
	if _, ok, err := CanonicalScalar(fa, 3); ok || err != nil {
		t.Fatalf("null: %v %v", ok, err)
	}
	lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
	lb.Append(true)
	la := lb.NewArray()
	defer la.Release()
	lb.Release()
	if _, _, err := CanonicalScalar(la, 0); err == nil || err.Error() != "scalar key: unsupported column type list<item: int32, nullable> for @unique/@key enforcement" {
		t.Fatalf("list: %v", err)
	}
}

func TestTupleHelpers(t *testing.T) {
	if got := TupleID([]string{"solo, \"x\""}); got != `solo, "x"` {
		t.Fatal(got)
	}
	if got := TupleID([]string{"a", "b\\\t\x7f"}); got != `["a","b\\\t`+"\x7f"+`"]` {
		t.Fatal(got)
	}
	if got := FormatTuple([]string{"a", "b"}); got != "(a, b)" {
		t.Fatal(got)
	}
	if got := UniqueViolation("T", []string{"a"}, []string{"v"}, "x", "y"); got != "@unique violation on T.a: value 'v' held by 'x' and 'y'" {
		t.Fatal(got)
	}
}
