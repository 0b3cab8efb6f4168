package rows

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// Strings exercising escapes, unicode and emptiness; every one gets a row suffix so
// @unique and @key values stay distinct.
var stringPalette = []string{"plain", "ünïcödé ✓ 世界 😀", `quote " back \ slash`, "ctl \u0001\t\n\u007f", "", "a,b;c"}

// patternValue produces a value matching a known @check pattern of the example schemas.
func patternValue(t *testing.T, pattern string, i int) string {
	switch pattern {
	case `^[^@ ]+@[^@ ]+$`:
		return fmt.Sprintf("user%d@exämple.com", i)
	case `^[a-z0-9-]+$`:
		return fmt.Sprintf("slug-%d", i)
	case `^https?://`:
		return fmt.Sprintf("https://example.com/ü/%d", i)
	}
	t.Fatalf("no generator for @check pattern %q", pattern)
	return ""
}

func scalarValue(s pg.Scalar, i int) string {
	pick := func(vals ...string) string { return vals[i%len(vals)] }
	switch s {
	case pg.String:
		return quote(fmt.Sprintf("%s-%d", stringPalette[i%len(stringPalette)], i))
	case pg.Bool:
		return pick("true", "false")
	case pg.I32:
		return pick("-2147483648", "2147483647", "0", "-1", "42")
	case pg.I64:
		return pick("-9223372036854775808", "9223372036854775807", "9007199254740993", "-1", "0")
	case pg.U32:
		return pick("0", "4294967295", "7")
	case pg.U64:
		return pick("0", "18446744073709551615", "9007199254740993")
	case pg.F32:
		return pick("0.1", "-3.4028235e38", "1e-45", "0", "16777216", "-0.0", "1.17549435e-38")
	case pg.F64:
		return pick("0.1", "1.7976931348623157e308", "5e-324", "-2.5", "-0.0", "123456789.125")
	case pg.Date:
		return pick(`"2024-01-01"`, "-719162", "0", "2932896", `"1969-07-20"`)
	case pg.DateTime:
		return pick(`"2024-06-01T12:00:00.123Z"`, "-62135596800000", "0", "253402300799999", `"1969-07-20T20:17:40-05:00"`)
	case pg.Blob:
		all := make([]byte, 256)
		for j := range all {
			all[j] = byte(j)
		}
		return pick(`"base64:"`, `"base64:aGVsbG8="`, `"base64:`+base64.StdEncoding.EncodeToString(all)+`"`)
	}
	panic("no scalar " + s)
}

// genValue renders the JSON value of property p on row i (null on every fourth row when
// nullable, respecting @key uniqueness, @range and @check).
func genValue(t *testing.T, node *pg.NodeType, p *pg.Property, i int) string {
	ty := p.Type
	isKey := node != nil && slices.Contains(node.Key, p.Name)
	if ty.Nullable && i%4 == 3 {
		return "null"
	}
	if node != nil {
		for _, c := range node.Checks {
			if c.Property == p.Name {
				return quote(patternValue(t, c.Pattern, i))
			}
		}
		for _, r := range node.Ranges {
			if r.Property == p.Name {
				lo, span := 0.0, 1000.0
				if r.Min != nil {
					lo = boundF64(r.Min)
				}
				if r.Max != nil {
					span = boundF64(r.Max) - lo + 1
				}
				return fmt.Sprint(lo + math.Mod(float64(i*37), span))
			}
		}
	}
	switch {
	case ty.IsEnum():
		return quote(ty.EnumValues[i%len(ty.EnumValues)])
	case isKey && ty.Scalar != pg.String:
		return fmt.Sprint(i + 1) // distinct numeric key members
	case ty.IsVector():
		items := make([]string, ty.VectorDim)
		for j := range items {
			items[j] = fmt.Sprint(float32(i)*0.25 - float32(j)*1.5)
		}
		return "[" + strings.Join(items, ",") + "]"
	case ty.List:
		if i%3 == 0 {
			return "[]"
		}
		return "[" + scalarValue(ty.Scalar, i) + "," + scalarValue(ty.Scalar, i+1) + "," + scalarValue(ty.Scalar, i+2) + "]"
	}
	return scalarValue(ty.Scalar, i)
}

// genBatch renders rows of every node and edge type of cat with every property populated.
func genBatch(t *testing.T, cat *pg.Catalog, rows int) []string {
	var lines []string
	data := func(node *pg.NodeType, tbl *pg.Table, i int) string {
		var parts []string
		if (node == nil || len(node.Key) == 0) && i%2 == 0 {
			parts = append(parts, fmt.Sprintf(`"id":"%s-%d"`, strings.ToLower(tbl.Name), i))
		}
		for _, p := range tbl.Properties {
			parts = append(parts, quote(p.Name)+":"+genValue(t, node, p, i))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	for i := 0; i < rows; i++ {
		for _, n := range cat.Nodes {
			lines = append(lines, fmt.Sprintf(`{"type":%s,"data":%s}`, quote(n.Name), data(n, &n.Table, i)))
		}
		for _, e := range cat.Edges {
			lines = append(lines, fmt.Sprintf(`{"edge":%s,"from":"n-%d","to":"ü-%d","data":%s}`, quote(e.Name), i, i, data(nil, &e.Table, i)))
		}
	}
	return lines
}

func exportAll(t *testing.T, cat *pg.Catalog, out map[string]*TableBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := Export(cat, k, out[k].Record, &buf); err != nil {
			t.Fatalf("export %s: %v", k, err)
		}
	}
	return buf.Bytes()
}

// Build → Export → framing.Parse → Build gives equal records for the example schemas.
func TestRoundTrip(t *testing.T) {
	schemas := map[string]string{"allTypes": allTypes}
	for _, f := range []string{"crm.pg", "docs.pg", "example.pg", "telemetry.pg"} {
		schemas[f] = graphtest.Schema(t, f)
	}
	for name, src := range schemas {
		for _, mode := range []Mode{Append, Merge, Overwrite} {
			t.Run(name+"/"+string(mode), func(t *testing.T) {
				cat := catalog(t, src)
				lines := genBatch(t, cat, 12)
				first, err := run(t, src, mode, Options{}, lines...)
				if err != nil {
					t.Fatalf("first build: %v", err)
				}
				if len(first) != len(cat.Nodes)+len(cat.Edges) {
					t.Fatalf("%d tables built", len(first))
				}
				exported := exportAll(t, cat, first)
				recs, err := framing.ParseBytes(exported, framing.DefaultLimits())
				if err != nil {
					t.Fatalf("exported batch does not frame: %v\n%s", err, exported)
				}
				second, err := runRecs(t, cat, mode, Options{NewID: func() string { t.Fatal("id minted on reload"); return "" }}, recs)
				if err != nil {
					t.Fatalf("reload: %v", err)
				}
				for key, a := range first {
					b := second[key]
					if b == nil {
						t.Fatalf("%s missing after reload", key)
					}
					if b.Record.Schema() != a.Record.Schema() || !array.RecordEqual(a.Record, b.Record) {
						t.Fatalf("%s differs after the round trip:\n%v\n%v", key, a.Record, b.Record)
					}
					if !slices.Equal(a.IDs, b.IDs) || !slices.Equal(a.Src, b.Src) || !slices.Equal(a.Dst, b.Dst) {
						t.Fatalf("%s ids/endpoints differ", key)
					}
				}
				if again := exportAll(t, cat, second); !bytes.Equal(again, exported) {
					t.Fatalf("export is not stable:\n%s\n%s", exported, again)
				}
			})
		}
	}
}

func TestExportShape(t *testing.T) {
	ex := graphtest.Schema(t, "example.pg")
	cat := catalog(t, ex)
	out := mustRun(t, ex, Merge,
		`{"type":"Project","data":{"org":"acme","slug":"x","name":"X","status":"active","started_at":"2024-01-01T00:00:00Z"}}`,
		`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","since":"2024-01-01","role":"dev \"lead\""}}`,
		`{"type":"Doc","data":{"url":"https://d","title":"T","body":"B","embedding":[0.5,-1,1e-7,0,0,0,0,3.4028235e38]}}`)
	var buf bytes.Buffer
	for _, k := range []string{"node:Project", "edge:WorksAt", "node:Doc"} {
		if err := Export(cat, k, out[k].Record, &buf); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"type":"Project","data":{"id":"[\"acme\",\"x\"]","name":"X","org":"acme","slug":"x","stars":null,"started_at":1704067200000,"status":"active"}}
{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"dev \"lead\"","since":19723}}
{"type":"Doc","data":{"body":"B","embedding":[0.5,-1,1e-07,0,0,0,0,3.4028235e+38],"id":"https://d","title":"T","url":"https://d"}}
`
	if buf.String() != want {
		t.Fatalf("export:\n%s\nwant:\n%s", buf.String(), want)
	}
	for _, c := range []struct{ key, err string }{
		{"node:Nope", "unknown node type 'Nope'"},
		{"edge:Nope", "unknown edge type 'Nope'"},
		{"Project", "invalid export table key 'Project'"},
		{"node:Doc", "rows: export of node:Doc: record has 7 columns, the table 5"},
	} {
		if err := Export(cat, c.key, out["node:Project"].Record, &buf); err == nil || err.Error() != c.err {
			t.Errorf("%s: %v", c.key, err)
		}
	}
}
