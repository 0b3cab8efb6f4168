package rows

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

func TestUnknownTypesAndFields(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	_, err := run(t, crm, Merge, Options{}, `{"type":"Org","data":{"slug":"a","name":"A","tier":"pro"}}`, ``, `{"type":"Nope"}`)
	wantInvalid(t, err, 3, "type", `unknown node type 'Nope'`)
	_, err = run(t, crm, Merge, Options{}, `{"edge":"Likes","from":"a","to":"b"}`)
	wantInvalid(t, err, 1, "edge", `unknown edge type 'Likes'`)
	_, err = run(t, crm, Merge, Options{}, `{"type":"Org","data":{"slug":"a","name":"A","tier":"pro","zz":1,"extra":true}}`)
	wantInvalid(t, err, 1, "data.extra", `unknown input field 'extra' for 'node:Org'`)
	_, err = run(t, crm, Merge, Options{}, `{"edge":"knows","from":"a","to":"b","data":{"since":1}}`)
	wantInvalid(t, err, 1, "data.since", `unknown input field 'since' for 'edge:Knows'`)
	// Node type names are exact; edge names fall back to a case-insensitive match.
	_, err = run(t, crm, Merge, Options{}, `{"type":"org","data":{}}`)
	wantInvalid(t, err, 1, "type", `unknown node type 'org'`)
	out := mustRun(t, crm, Merge, `{"edge":"KNOWS","from":"a","to":"b","data":{"weight":0.5}}`)
	if b := out["edge:Knows"]; b == nil || b.Edge.Name != "Knows" {
		t.Fatalf("case-insensitive edge lookup: %v", out)
	}
}

// Records assembled by hand (not by framing) are held to the same field rules.
func TestReservedDataFields(t *testing.T) {
	cat := catalog(t, allTypes)
	rec := func(kind framing.RecordKind, typ string, data map[string]string) []framing.Record {
		r := framing.Record{Line: 4, Kind: kind, Type: typ, From: "a", To: "b"}
		for k, v := range data {
			r.Data = append(r.Data, framing.Member{Name: k, Value: json.RawMessage(v)})
		}
		return []framing.Record{r}
	}
	_, err := runRecs(t, cat, Merge, Options{}, rec(framing.NodeRecord, "Free", map[string]string{"_rowid": "1"}))
	wantInvalid(t, err, 4, "data._rowid", `input field '_rowid' is reserved physical state`)
	_, err = runRecs(t, cat, Merge, Options{}, rec(framing.EdgeRecord, "Loose", map[string]string{"src": `"x"`}))
	wantInvalid(t, err, 4, "data.src", `edge data field 'src' is reserved structural state`)
	_, err = runRecs(t, cat, Merge, Options{}, rec(framing.NodeRecord, "Free", map[string]string{"n": ` [1] `}))
	wantInvalid(t, err, 4, "data.n", `strict property 'n' expects Int32, got [1]`)
	_, err = runRecs(t, cat, Merge, Options{}, []framing.Record{{Line: 2}})
	wantInvalid(t, err, 2, "", `graph batch record must contain exactly one of 'type' or 'edge'`)
}

func TestModeAndEmptyBatch(t *testing.T) {
	_, err := run(t, allTypes, Mode("upsert"), Options{})
	wantInvalid(t, err, 0, "mode", `unknown load mode 'upsert' (expected append, merge or overwrite)`)
	out, err := run(t, allTypes, Overwrite, Options{})
	if err != nil || len(out) != 0 {
		t.Fatalf("empty batch: %v %v", out, err)
	}
	if _, err := Build(nil, nil, Merge, Options{}); err == nil {
		t.Fatal("nil catalog accepted")
	}
}

// Same id twice: merge keeps the last record (at its position), append and overwrite refuse.
func TestDedupeByMode(t *testing.T) {
	lines := []string{
		`{"type":"Free","data":{"id":"A","n":1}}`,
		`{"type":"Free","data":{"id":"B","n":2}}`,
		`{"type":"Free","data":{"id":"A","n":3}}`,
		`{"edge":"Loose","from":"A","to":"B","data":{"id":"e"}}`,
		`{"edge":"Loose","from":"B","to":"A","data":{"id":"e"}}`,
	}
	out := mustRun(t, allTypes, Merge, lines...)
	free := out["node:Free"]
	if !reflect.DeepEqual(free.IDs, []string{"B", "A"}) || !reflect.DeepEqual(free.Lines, []int{2, 3}) ||
		!reflect.DeepEqual(colJSON(t, free, "n"), []string{"2", "3"}) || free.InputCount != 3 || free.Record.NumRows() != 2 {
		t.Fatalf("merge dedupe: ids %v lines %v n %v input %d", free.IDs, free.Lines, colJSON(t, free, "n"), free.InputCount)
	}
	loose := out["edge:Loose"]
	if loose.Len() != 1 || loose.Src[0] != "B" || loose.Dst[0] != "A" || loose.InputCount != 2 ||
		!reflect.DeepEqual(colJSON(t, loose, "src"), []string{`"B"`}) {
		t.Fatalf("merge edge dedupe: %+v", loose)
	}
	for _, mode := range []Mode{Append, Overwrite} {
		_, err := run(t, allTypes, mode, Options{}, lines...)
		wantKeyConflict(t, err, 3, "node:Free", "A")
		_, err = run(t, allTypes, mode, Options{}, lines[3:]...)
		wantKeyConflict(t, err, 2, "edge:Loose", "e")
	}
	// Distinct ids pass in every mode.
	for _, mode := range []Mode{Append, Merge, Overwrite} {
		out := mustRun(t, allTypes, mode, lines[:2]...)
		if out["node:Free"].Len() != 2 {
			t.Fatal(mode)
		}
	}
}

// A keyed node listed twice is a @unique violation in every mode (docs/omnigraph-format.md §5.5).
func TestDuplicateKeyIsUniqueViolation(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	a := `{"type":"Person","data":{"email":"a@x.io","name":"A","joined_at":0}}`
	b := `{"type":"Person","data":{"email":"b@x.io","name":"B","joined_at":0}}`
	for _, mode := range []Mode{Append, Merge, Overwrite} {
		_, err := run(t, crm, mode, Options{}, a, b, a)
		wantInvalid(t, err, 3, "data.email", `@unique violation on Person.email: value 'a@x.io' held by 'a@x.io' and 'a@x.io'`)
	}
	tel := graphtest.Schema(t, "telemetry.pg")
	s := `{"type":"Sensor","data":{"site":"ams1","serial":42,"model":"T9","installed":19000}}`
	_, err := run(t, tel, Merge, Options{}, s, strings.Replace(s, "T9", "T10", 1))
	wantInvalid(t, err, 2, "data.serial,data.site",
		`@unique violation on Sensor.(serial, site): value '(42, ams1)' held by '["42","ams1"]' and '["42","ams1"]'`)
}

func TestUniqueInBatch(t *testing.T) {
	// Non-key @unique: two ids holding one value; null members are exempt.
	_, err := run(t, allTypes, Merge, Options{},
		`{"type":"Free","data":{"id":"a","v":"same"}}`,
		`{"type":"Free","data":{"id":"n1","v":null}}`,
		`{"type":"Free","data":{"id":"n2"}}`,
		`{"type":"Free","data":{"id":"b","v":"same"}}`)
	wantInvalid(t, err, 4, "data.v", `@unique violation on Free.v: value 'same' held by 'a' and 'b'`)
	mustRun(t, allTypes, Append, `{"type":"Free","data":{"id":"n1","v":null}}`, `{"type":"Free","data":{"id":"n2"}}`)
	// Even one id listed twice with the same value (merge): a batch has no order.
	_, err = run(t, allTypes, Merge, Options{}, `{"type":"Free","data":{"id":"a","v":"x"}}`, `{"type":"Free","data":{"id":"a","v":"x"}}`)
	wantInvalid(t, err, 2, "data.v", `@unique violation on Free.v: value 'x' held by 'a' and 'a'`)
	// Composite @unique(src, dst) on an edge: a tuple, not per column.
	mustRun(t, allTypes, Append,
		`{"edge":"Link","from":"a","to":"b","data":{"id":"e1"}}`,
		`{"edge":"Link","from":"a","to":"c","data":{"id":"e2"}}`,
		`{"edge":"Link","from":"b","to":"b","data":{"id":"e3"}}`)
	_, err = run(t, allTypes, Append, Options{},
		`{"edge":"Link","from":"a","to":"b","data":{"id":"e1"}}`,
		`{"edge":"Link","from":"a","to":"b","data":{"id":"e2"}}`)
	wantInvalid(t, err, 2, "to,from", `@unique violation on Link.(dst, src): value '(b, a)' held by 'e1' and 'e2'`)
	// A @unique group over a list column fails loudly on a non-null row.
	const listUnique = "node T { tags: [String]?\n @unique(tags) }"
	mustRun(t, listUnique, Merge, `{"type":"T","data":{"id":"x"}}`)
	_, err = run(t, listUnique, Merge, Options{}, `{"type":"T","data":{"id":"x","tags":["a"]}}`)
	wantInvalid(t, err, 1, "data.tags", `scalar key: unsupported column type list<item: utf8, nullable> for @unique/@key enforcement`)
}

func TestRangeAndCheck(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	p := func(email, age string) string {
		return `{"type":"Person","data":{"email":"` + email + `","name":"N","joined_at":0,"age":` + age + `}}`
	}
	mustRun(t, crm, Merge, p("a@x", "0"), p("b@x", "150"), p("c@x", "null"))
	_, err := run(t, crm, Merge, Options{}, p("a@x", "0"), p("b@x", "-1"))
	wantInvalid(t, err, 2, "data.age", `@range violation on Person.age: value -1 < min 0`)
	_, err = run(t, crm, Merge, Options{}, p("a@x", "151"))
	wantInvalid(t, err, 1, "data.age", `@range violation on Person.age: value 151 > max 150`)
	_, err = run(t, crm, Merge, Options{}, p("a@x", "1"), p("no at sign", "1"))
	wantInvalid(t, err, 2, "data.email", `@check violation on Person.email: value 'no at sign' does not match pattern '^[^@ ]+@[^@ ]+$'`)
	// Float ranges print as Rust's f64 Display: F32 values widened to f64.
	const fr = "node T { x: F32\n y: F64?\n @range(x, 0.5..1.5)\n @range(y, -10.0..-0.25) }"
	mustRun(t, fr, Merge, `{"type":"T","data":{"x":0.5,"y":-0.25}}`)
	_, err = run(t, fr, Merge, Options{}, `{"type":"T","data":{"x":0.1}}`)
	wantInvalid(t, err, 1, "data.x", `@range violation on T.x: value 0.10000000149011612 < min 0.5`)
	_, err = run(t, fr, Merge, Options{}, `{"type":"T","data":{"x":1,"y":1e21}}`)
	wantInvalid(t, err, 1, "data.y", `@range violation on T.y: value 1000000000000000000000 > max -0.25`)
	// @check runs in every mode and over every input row, also a row merge replaces.
	_, err = run(t, crm, Merge, Options{}, p("bad", "1"))
	wantInvalid(t, err, 1, "data.email", `@check violation on Person.email: value 'bad' does not match pattern '^[^@ ]+@[^@ ]+$'`)
	// An invalid pattern is reported when the table has rows.
	const bad = `node T { s: String
 @check(s, "a(") }`
	mustRun(t, bad, Merge)
	_, err = run(t, bad, Merge, Options{}, `{"type":"T","data":{"s":"a"}}`)
	wantInvalid(t, err, 1, "data.s", "@check on T.s has invalid regex 'a(': error parsing regexp: missing closing ): `a(`")
}

// Rust's regex classes \d \s \w are Unicode-aware; Go's are ASCII. The translation keeps
// the reference's meaning.
func TestCheckUsesUnicodeClasses(t *testing.T) {
	cases := []struct {
		pattern, value string
		match          bool
	}{
		{`^\d+$`, "١٢٣", true}, // Arabic-Indic digits
		{`^\d+$`, "12a", false},
		{`^\w+$`, "héllo_世界", true},
		{`^\w+$`, "a-b", false},
		{`^\s$`, "\u00a0", true},
		{`^\S+$`, "a\u3000b", false},
		{`^[\d\s]+$`, "٣ ٤\u2003", true},
		{`^[^\d]+$`, "abc٣", false},
		{`^\W$`, "é", false},
		{`^[\\d]+$`, `\d`, true}, // an escaped backslash is not a class
		{`^[]d]+$`, "]d", true},
		{`^[[:alpha:]\d]+$`, "ab٣", true},
		{`\.`, "a.b", true},
	}
	for _, c := range cases {
		re, err := compileCheck(c.pattern)
		if err != nil {
			t.Fatalf("%s: %v", c.pattern, err)
		}
		if re.MatchString(c.value) != c.match {
			t.Errorf("%s on %q: want %v (translated %s)", c.pattern, c.value, c.match, translateRegex(c.pattern))
		}
	}
}

// The phases run in the reference's order: per-line checks for the whole batch first, then
// per declaration the field check, conversion, ids; then the evaluator; then dedupe.
func TestViolationOrder(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	// A bad value on line 1 loses to an unknown type on line 2 (per-line phase first).
	_, err := run(t, crm, Merge, Options{}, `{"type":"Org","data":{"slug":1}}`, `{"type":"Nope"}`)
	wantInvalid(t, err, 2, "type", `unknown node type 'Nope'`)
	// Within a declaration, unknown fields come before values.
	_, err = run(t, crm, Merge, Options{}, `{"type":"Org","data":{"slug":1}}`, `{"type":"Org","data":{"slug":"x","what":1}}`)
	wantInvalid(t, err, 2, "data.what", `unknown input field 'what' for 'node:Org'`)
	// Conversion errors are row by row, columns in schema order.
	_, err = run(t, crm, Merge, Options{},
		`{"type":"Org","data":{"slug":"a","name":"A","tier":"pro","founded":"x","domain":5}}`)
	wantInvalid(t, err, 1, "data.domain", `strict property 'domain' expects Utf8, got 5`)
	// Value checks (enum) come before uniqueness; uniqueness before the KeyConflict.
	_, err = run(t, crm, Append, Options{},
		`{"type":"Org","data":{"slug":"a","name":"A","tier":"pro","domain":"d"}}`,
		`{"type":"Org","data":{"slug":"b","name":"B","tier":"pro","domain":"d"}}`,
		`{"type":"Org","data":{"slug":"c","name":"C","tier":"gold"}}`)
	wantInvalid(t, err, 3, "data.tier", `invalid enum value 'gold' for Org.tier (expected: enterprise, free, pro)`)
	_, err = run(t, allTypes, Append, Options{},
		`{"type":"Free","data":{"id":"a","v":"1"}}`, `{"type":"Free","data":{"id":"a","v":"2"}}`,
		`{"type":"Free","data":{"id":"b","v":"1"}}`)
	wantInvalid(t, err, 3, "data.v", `@unique violation on Free.v: value '1' held by 'a' and 'b'`)
	// Node tables are evaluated before edge tables.
	_, err = run(t, crm, Merge, Options{},
		`{"edge":"EmployedBy","from":"a","to":"b","data":{"since":"bad"}}`,
		`{"type":"Org","data":{"slug":"a","name":"A","tier":"pro","founded":"bad"}}`)
	wantInvalid(t, err, 2, "data.founded", `invalid Date literal 'bad'`)
}

func TestBatchHelpers(t *testing.T) {
	out := mustRun(t, allTypes, Merge,
		`{"type":"Free","data":{"id":"a","v":"x"}}`,
		`{"type":"Free","data":{"id":"b"}}`,
		`{"edge":"Link","from":"a","to":"b","data":{"id":"e1"}}`,
		`{"edge":"Link","from":"a","to":"c","data":{"id":"e2"}}`,
		`{"edge":"Link","from":"b","to":"c","data":{"id":"e3"}}`,
		thing("k", ""))
	free, link := out["node:Free"], out["edge:Link"]
	if g := free.CommittedUniqueGroups(); !reflect.DeepEqual(g, [][]string{{"v"}}) {
		t.Fatalf("free groups %v", g)
	}
	if g := link.CommittedUniqueGroups(); !reflect.DeepEqual(g, [][]string{{"dst", "src"}}) {
		t.Fatalf("link groups %v", g)
	}
	if g := out["node:Thing"].CommittedUniqueGroups(); g != nil {
		t.Fatalf("thing groups %v", g)
	}
	// A @unique group equal to the @key is the key's: never probed against committed rows.
	ku := mustRun(t, "node K { name: String @key\n n: I32?\n @unique(name)\n @unique(n) }", Merge, `{"type":"K","data":{"name":"a"}}`)
	if g := ku["node:K"].CommittedUniqueGroups(); !reflect.DeepEqual(g, [][]string{{"n"}}) {
		t.Fatalf("keyed groups %v", g)
	}
	tu, err := free.Tuples([]string{"v"})
	if err != nil || !reflect.DeepEqual(tu, [][]string{{"x"}, nil}) {
		t.Fatalf("tuples %v %v", tu, err)
	}
	tu, err = link.Tuples([]string{"src", "dst"})
	if err != nil || !reflect.DeepEqual(tu, [][]string{{"a", "b"}, {"a", "c"}, {"b", "c"}}) {
		t.Fatalf("edge tuples %v %v", tu, err)
	}
	if _, err := link.Tuples([]string{"nope"}); err == nil {
		t.Fatal("unknown column accepted")
	}
	if d := link.OutDegree(); !reflect.DeepEqual(d, map[string]int{"a": 2, "b": 1}) {
		t.Fatalf("out degree %v", d)
	}
	if free.OutDegree() != nil {
		t.Fatal("node out degree")
	}
	if r := link.Rows(); !reflect.DeepEqual(r, map[string]int{"e1": 0, "e2": 1, "e3": 2}) {
		t.Fatalf("rows %v", r)
	}
	if !link.Record.Schema().Equal(link.Edge.Arrow) || link.Record.Schema() != link.Edge.Arrow {
		t.Fatal("record schema is not the table's schema")
	}
}

func TestErrorsAreTyped(t *testing.T) {
	_, err := run(t, allTypes, Append, Options{}, `{"type":"Free","data":{"id":"a"}}`, `{"type":"Free","data":{"id":"a"}}`)
	if errs.Kind(err) != errs.KindKeyConflict || !errs.Permanent(err) {
		t.Fatalf("kind %s", errs.Kind(err))
	}
	var le *errs.LineError
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "line 2: node type 'Free' already has this id") {
		t.Fatalf("message %v", err)
	}
}

// A parallel build reports exactly the violation a sequential one does, and builds the same
// batches.
func TestParallelBuildMatchesSequential(t *testing.T) {
	crm := graphtest.Schema(t, "crm.pg")
	cases := [][]string{
		{`{"edge":"EmployedBy","from":"a","to":"b","data":{"since":"bad"}}`, `{"type":"Org","data":{"slug":"a","name":"A","tier":"pro","founded":"bad"}}`},
		{`{"type":"Org","data":{"slug":"a","name":"A","tier":"gold"}}`, `{"edge":"EmployedBy","from":"a","to":"b","data":{"since":"2020-01-01"}}`},
		{`{"type":"Org","data":{"slug":"a","name":"A","tier":"pro"}}`, `{"edge":"EmployedBy","from":"a","to":"b","data":{"since":"2020-01-01"}}`},
	}
	for i, lines := range cases {
		seqOut, seqErr := run(t, crm, Merge, Options{}, lines...)
		parOut, parErr := run(t, crm, Merge, Options{Parallel: 8}, lines...)
		if fmt.Sprint(seqErr) != fmt.Sprint(parErr) || len(seqOut) != len(parOut) {
			t.Fatalf("case %d: sequential %v (%d tables), parallel %v (%d tables)", i, seqErr, len(seqOut), parErr, len(parOut))
		}
		for k, b := range seqOut {
			if fmt.Sprint(b.IDs) != fmt.Sprint(parOut[k].IDs) {
				t.Fatalf("case %d %s: ids %v vs %v", i, k, b.IDs, parOut[k].IDs)
			}
		}
	}
}
