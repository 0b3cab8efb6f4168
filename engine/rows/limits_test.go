package rows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/framing"
)

const thingSchema = "node Thing {\n key: String @key\n payload: String\n}\nnode Bag { payload: String? }\nedge Rel: Bag -> Bag { note: String? }"

func thingRecs(n int, payload string) []framing.Record {
	recs := make([]framing.Record, n)
	for i := range recs {
		recs[i] = framing.Record{Line: i + 1, Kind: framing.NodeRecord, Type: "Thing", Data: framing.Members{
			{Name: "key", Value: json.RawMessage(fmt.Sprintf(`"k%05d"`, i))},
			{Name: "payload", Value: json.RawMessage(`"` + payload + `"`)},
		}}
	}
	return recs
}

// keyed entities per table: 8,192 inclusive in append and merge; overwrite is exempt.
func TestKeyedEntityCeiling(t *testing.T) {
	cat := catalog(t, thingSchema)
	for _, mode := range []Mode{Append, Merge} {
		out, err := runRecs(t, cat, mode, Options{}, thingRecs(8192, "p"))
		if err != nil || out["node:Thing"].Len() != 8192 {
			t.Fatalf("%s at the ceiling: %v", mode, err)
		}
		_, err = runRecs(t, cat, mode, Options{}, thingRecs(8193, "p"))
		wantLimit(t, err, 8193, "keyed entities for node:Thing", 8192, 8193)
	}
	out, err := runRecs(t, cat, Overwrite, Options{}, thingRecs(8193, "p"))
	if err != nil || out["node:Thing"].Len() != 8193 {
		t.Fatalf("overwrite is exempt from the keyed ceiling: %v", err)
	}
	// Counted on input records (before dedupe), per table, for edges too.
	recs := parse(t, `{"edge":"Rel","from":"a","to":"b","data":{"id":"e"}}`, `{"edge":"Rel","from":"a","to":"b","data":{"id":"e"}}`,
		`{"type":"Bag","data":{}}`, `{"type":"Bag","data":{}}`)
	_, err = runRecs(t, cat, Merge, Options{MaxKeyedRows: 1}, recs)
	wantLimit(t, err, 2, "keyed entities for edge:Rel", 1, 2)
	_, err = runRecs(t, cat, Merge, Options{MaxKeyedRows: 2}, recs)
	if err != nil {
		t.Fatal(err)
	}
}

// The parse-time keyed estimate: string bytes (base64 data at its decoded size), 4 per
// number, supplied id, edge endpoints.
func TestKeyedParsedBytes(t *testing.T) {
	cat := catalog(t, thingSchema)
	recs := parse(t,
		`{"type":"Bag","data":{"id":"abc","payload":"12345"}}`,     // 3 + 5
		`{"edge":"Rel","from":"xy","to":"z","data":{"note":null}}`, // 3 (table edge:Rel)
		`{"type":"Bag","data":{"payload":"\u00e9"}}`,               // 2 decoded bytes
	)
	if got := parsedEstimate(&recs[0]) + parsedEstimate(&recs[2]); got != 10 {
		t.Fatalf("estimate %d", got)
	}
	// At exactly the limit the estimate passes (the built Arrow size then decides); one
	// byte less and the estimate refuses on the line that crossed it.
	_, err := runRecs(t, cat, Append, Options{MaxKeyedBytes: 10, MaxArrowBytes: 1 << 20}, recs)
	wantLimit(t, err, 0, "keyed entity bytes for node:Bag", 10, uint64(builtBytes(t, recs, "node:Bag")))
	_, err = runRecs(t, cat, Merge, Options{MaxKeyedBytes: 9}, recs)
	wantLimit(t, err, 3, "keyed parsed entity bytes for node:Bag", 9, 10)
	// Overwrite is exempt.
	if _, err = runRecs(t, cat, Overwrite, Options{MaxKeyedBytes: 9}, recs); err != nil {
		t.Fatal(err)
	}
	for raw, want := range map[string]int64{
		`null`: 0, `true`: 1, `-1.5e3`: 4, `"base64:aGVsbG8="`: 5, `"base64:aGVsbA=="`: 4, `"base64:"`: 0,
		`"base64\u003aaGk="`: 2, `[]`: 4, `[1,"ab",[null]]`: 16 + 4 + 2 + 8, `{"a":1,"b":"xy"}`: 6,
	} {
		if got := estimateJSON([]byte(raw)); got != want {
			t.Errorf("estimate %s = %d, want %d", raw, got, want)
		}
	}
}

func builtBytes(t *testing.T, recs []framing.Record, key string) int64 {
	t.Helper()
	out, err := runRecs(t, catalog(t, thingSchema), Overwrite, Options{}, recs)
	if err != nil {
		t.Fatal(err)
	}
	return recordBytes(out[key].Record)
}

// The reference's wide-row test: one row over 32 MiB. Append/merge stop at the parse-time
// keyed estimate, overwrite at the projected Arrow preflight.
func TestWideRowDefaults(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates ~100 MiB")
	}
	cat := catalog(t, thingSchema)
	wide := strings.Repeat("x", 32<<20+1024)
	recs := []framing.Record{{Line: 1, Kind: framing.NodeRecord, Type: "Thing", Data: framing.Members{
		{Name: "key", Value: json.RawMessage(`"wide"`)}, {Name: "payload", Value: json.RawMessage(`"` + wide + `"`)}}}}
	_, err := runRecs(t, cat, Append, Options{}, recs)
	wantLimit(t, err, 1, "keyed parsed entity bytes for node:Thing", 32<<20, 32<<20+1024+4)
	_, err = runRecs(t, cat, Overwrite, Options{}, recs)
	wantLimit(t, err, 1, "strict_input_arrow_bytes", 32<<20, 16+16+4+16+32<<20+1024)
}

// The projected Arrow size per declaration, every mode: 16 bytes per cell plus the
// payload (string bytes, fixed widths, list items, vector dimension × 5).
func TestStrictArrowBytes(t *testing.T) {
	cat := catalog(t, thingSchema)
	recs := thingRecs(3, "0123456789") // per row: id 16 + key 16+6 + payload 16+10 = 64
	for _, mode := range []Mode{Append, Merge, Overwrite} {
		if _, err := runRecs(t, cat, mode, Options{MaxArrowBytes: 192}, recs); err != nil {
			t.Fatalf("%s at the limit: %v", mode, err)
		}
		_, err := runRecs(t, cat, mode, Options{MaxArrowBytes: 191}, recs)
		wantLimit(t, err, 3, "strict_input_arrow_bytes", 191, 192)
	}
	// Edge rows count src/dst and a supplied id.
	edges := parse(t, `{"edge":"Rel","from":"ab","to":"c","data":{"id":"e1","note":"zz"}}`)
	if _, err := runRecs(t, cat, Overwrite, Options{MaxArrowBytes: 16 + 2 + 16 + 2 + 16 + 1 + 16 + 2}, edges); err != nil {
		t.Fatal(err)
	}
	_, err := runRecs(t, cat, Overwrite, Options{MaxArrowBytes: 16 + 2 + 16 + 2 + 16 + 1 + 16 + 1}, edges)
	wantLimit(t, err, 1, "strict_input_arrow_bytes", 70, 71)

	at := catalog(t, allTypes)
	for _, c := range []struct {
		key, value string
		want       int64
	}{
		{"b", "true", 17}, {"i32", "1", 20}, {"i64", "null", 24}, {"f32", "1", 20}, {"f64", "1", 24},
		{"u32", "1", 20}, {"u64", "1", 24}, {"d", "1", 20}, {"dt", "1", 24}, {"s", `"ab"`, 18}, {"s", "null", 16},
		{"vec", "null", 16 + 15}, {"ls", `["ab",1]`, 16 + 10 + 8}, {"li64", `[1,2]`, 16 + 18}, {"lb", "[true]", 18},
		{"blob", `"base64:aGVsbG8="`, 21}, {"ls", `"x"`, 16},
	} {
		p := at.Node("Thing").Property(c.key)
		if got := projectedCell(p.Type, []byte(c.value)); got != c.want {
			t.Errorf("%s=%s projects %d, want %d", c.key, c.value, got, c.want)
		}
	}
}

// The built record's Arrow size (append/merge): exactly at the limit passes.
func TestKeyedEntityBytes(t *testing.T) {
	cat := catalog(t, thingSchema)
	recs := thingRecs(100, strings.Repeat("y", 50))
	size := builtBytes(t, recs, "node:Thing")
	for _, mode := range []Mode{Append, Merge} {
		if _, err := runRecs(t, cat, mode, Options{MaxKeyedBytes: size}, recs); err != nil {
			t.Fatalf("%s at the limit: %v", mode, err)
		}
		_, err := runRecs(t, cat, mode, Options{MaxKeyedBytes: size - 1}, recs)
		wantLimit(t, err, 0, "keyed entity bytes for node:Thing", uint64(size-1), uint64(size))
	}
	if _, err := runRecs(t, cat, Overwrite, Options{MaxKeyedBytes: size - 1}, recs); err != nil {
		t.Fatal(err)
	}
}
