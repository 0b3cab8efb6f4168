package rows

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// fuzzSeeds are batches against graph/pg/testdata/example.pg; they are added in code and
// kept as files under testdata/fuzz/FuzzBuild.
var fuzzSeeds = []string{
	`{"type":"Person","data":{"handle":"alice","name":"Alice","email":"a@x.io","born":"1990-05-01","skills":["go","rust"],"active":true}}
{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"smb","founded":12000,"revenue_usd":18446744073709551615}}
{"type":"Project","data":{"org":"acme","slug":"graph","name":"G","status":"active","started_at":"2024-01-01T00:00:00Z","stars":5}}
{"type":"Doc","data":{"url":"https://d/1","title":"T","body":"B","embedding":[1,2,3,4,5,6,7,8]}}
{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"role":"dev","since":19723}}
{"edge":"Contributes","from":"alice","to":"[\"acme\",\"graph\"]","data":{"id":"c1","commits":4294967295}}
{"edge":"Owns","from":"acme.io","to":"[\"acme\",\"graph\"]"}
{"edge":"Describes","from":"https://d/1","to":"[\"acme\",\"graph\"]","data":{"relevance":0.5}}`,
	`{"type":"Person","data":{"handle":"a","name":"A","active":false}}
{"type":"Person","data":{"handle":"a","name":"B","active":true}}`,
	`{"type":"Project","data":{"id":"[\"acme\",\"x\"]","org":"acme","slug":"x","name":"X","status":"paused","started_at":0,"stars":-1}}`,
	`{"type":"Doc","data":{"url":"ftp://x","title":"T","body":"B","embedding":null}}`,
	`{"type":"Doc","data":{"url":"https://x","title":"T","body":"B","embedding":[1,2,3]}}`,
	`{"type":"Company","data":{"domain":"d","name":"N","size":"huge"}}`,
	`{"type":"Person","data":{"handle":"h","name":"N","active":true,"born":"2024-13-01","skills":[null]}}`,
	`{"edge":"Contributes","from":"a","to":"b","data":{"id":"e"}}
{"edge":"Contributes","from":"a","to":"b","data":{"id":"e"}}`,
	`{"edge":"contributes","from":"a","to":"b","data":{"commits":-1}}`,
	`{"type":"Person","data":{"handle":"x","name":"N","active":true,"email":"e"}}
{"type":"Person","data":{"handle":"y","name":"N","active":true,"email":"e"}}`,
	`{"type":"Nope"}`,
	`{"type":"Person","data":{"handle":"x","name":"N","active":true,"bogus":1}}`,
	`{"type":"Company","data":{"domain":"d","name":"N","size":"smb","revenue_usd":1.5e3,"founded":-2147483649}}`,
	`{"type":"Doc","data":{"url":"https://é","title":"\u0000","body":"\ud83d\ude00","embedding":[1e38,-1e38,0,0,0,0,0,-0.0]}}`,
	`{"edge":"Owns","from":"a","to":"b","data":{"id":"o"}}
{"edge":"Owns","from":"c","to":"d","data":{"id":"o"}}`,
	`{"type":"Person","data":{"handle":"p1","name":"N","active":true}}
{"type":"Person","data":{"handle":"p2","name":"N","active":true,"skills":[]}}
{"type":"Person","data":{"handle":"p3","name":"N","active":true,"born":-1}}
{"type":"Person","data":{"handle":"p4","name":"N","active":true,"email":null}}`,
}

func FuzzBuild(f *testing.F) {
	cat := catalog(f, graphtest.Schema(f, "example.pg"))
	for i, s := range fuzzSeeds {
		f.Add([]byte(s), uint8(i))
		f.Add([]byte(s), uint8(i)|0x80)
	}
	f.Fuzz(func(t *testing.T, data []byte, m uint8) {
		recs, err := framing.ParseBytes(data, framing.DefaultLimits())
		if err != nil {
			return
		}
		mode := []Mode{Append, Merge, Overwrite}[int(m&0x7f)%3]
		opts := Options{NewID: counterIDs()}
		if m&0x80 != 0 { // tiny ceilings reach every limit path
			opts.MaxKeyedRows, opts.MaxKeyedBytes, opts.MaxArrowBytes = 3, 300, 600
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		opts.Mem = mem
		checkFusedMatchesExact(t, cat, recs, mode, opts)
		mem.AssertSize(t, 0)
		opts.NewID = counterIDs()
		out, err := Build(cat, recs, mode, opts)
		if err != nil {
			checkTyped(t, err, recs)
			mem.AssertSize(t, 0)
			return
		}
		defer func() {
			for _, b := range out {
				b.Release()
			}
			mem.AssertSize(t, 0)
		}()
		// Whatever was accepted exports and reloads to equal records.
		exported := exportAll(t, cat, out)
		back, err := framing.ParseBytes(exported, framing.DefaultLimits())
		if err != nil {
			t.Fatalf("export does not frame: %v", err)
		}
		again, err := Build(cat, back, mode, Options{Mem: mem, NewID: func() string { t.Fatal("id minted on reload"); return "" }})
		if err != nil {
			t.Fatalf("export does not reload: %v\n%s", err, exported)
		}
		defer func() {
			for _, b := range again {
				b.Release()
			}
		}()
		if len(again) != len(out) {
			t.Fatalf("%d tables after reload, want %d", len(again), len(out))
		}
		for key, a := range out {
			b := again[key]
			if b == nil || !array.RecordEqual(a.Record, b.Record) || !slices.Equal(a.IDs, b.IDs) {
				t.Fatalf("%s changed in the round trip", key)
			}
			if a.Len() != int(a.Record.NumRows()) || len(a.Lines) != a.Len() || a.InputCount < a.Len() {
				t.Fatalf("%s: inconsistent batch", key)
			}
		}
		if !bytes.Equal(exportAll(t, cat, again), exported) {
			t.Fatal("export is not stable")
		}
	})
}

// checkTyped asserts a Build refusal is one of the typed errors, placed on a real line.
func checkTyped(t *testing.T, err error, recs []framing.Record) {
	t.Helper()
	switch errs.Kind(err) {
	case errs.KindInvalid, errs.KindKeyConflict, errs.KindResourceLimit:
	default:
		t.Fatalf("untyped error %T: %v", err, err)
	}
	line := 0
	var in *errs.InvalidInput
	var le *errs.LineError
	switch {
	case errors.As(err, &in):
		line = in.Line
		if in.Reason == "" || in.Field == "" {
			t.Fatalf("refusal without field or reason: %+v", in)
		}
	case errors.As(err, &le):
		line = le.Line
	default:
		var rl *errs.ResourceLimitExceeded
		if errors.As(err, &rl) { // the built-record ceiling names a table, not a line
			return
		}
		t.Fatalf("error without a line: %v", err)
	}
	if !slices.ContainsFunc(recs, func(r framing.Record) bool { return r.Line == line }) {
		t.Fatalf("error on line %d, which holds no record: %v", line, err)
	}
}

// checkFusedMatchesExact: the fused phases 1-2 succeed exactly when the exact ones do, and then
// build the same records and ids.
func checkFusedMatchesExact(t *testing.T, cat *pg.Catalog, recs []framing.Record, mode Mode, opts Options) {
	t.Helper()
	keyed := mode == Append || mode == Merge
	opts = opts.normalized()
	opts.NewID = counterIDs()
	fused, ok := fusedPhases(cat, recs, keyed, opts)
	opts.NewID = counterIDs()
	exact, err := exactPhases(cat, recs, keyed, opts)
	defer func() {
		for _, g := range append(fused, exact...) {
			g.release()
		}
	}()
	if ok != (err == nil) {
		t.Fatalf("fused pass ok=%v, exact phases error %v", ok, err)
	}
	if !ok {
		return
	}
	if len(fused) != len(exact) {
		t.Fatalf("fused pass built %d declarations, exact %d", len(fused), len(exact))
	}
	for i := range fused {
		f, e := fused[i], exact[i]
		if f.key != e.key || !array.RecordEqual(f.rec, e.rec) || !slices.Equal(f.ids, e.ids) {
			t.Fatalf("%s: fused pass built another record than the exact phases", e.key)
		}
	}
}
