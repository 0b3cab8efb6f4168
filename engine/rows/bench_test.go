package rows

import (
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// BenchmarkBuild8192: 8,192 keyed Person nodes of example.pg with all six properties
// (String @key, String, String? @unique, Date?, [String]?, Bool), the keyed ceiling.
func BenchmarkBuild8192(b *testing.B) {
	cat := catalog(b, graphtest.Schema(b, "example.pg"))
	var sb strings.Builder
	for i := 0; i < 8192; i++ {
		fmt.Fprintf(&sb, `{"type":"Person","data":{"handle":"user-%05d","name":"Person Number %d","email":"user%d@example.com","born":"19%02d-%02d-%02d","skills":["go","rust","sql"],"active":%t}}`+"\n",
			i, i, i, i%100, i%12+1, i%28+1, i%2 == 0)
	}
	recs, err := framing.ParseBytes([]byte(sb.String()), framing.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []Mode{Append, Merge} {
		b.Run(string(mode), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(sb.Len()))
			for b.Loop() {
				out, err := Build(cat, recs, mode, Options{})
				if err != nil {
					b.Fatal(err)
				}
				if out["node:Person"].Len() != 8192 {
					b.Fatal("rows")
				}
				out["node:Person"].Release()
			}
		})
	}
}

// BenchmarkBuildGraphBatch: the bench's sustained batch (internal/benchdata): 4,096 keyed
// Person nodes and the 4,096 Knows edges among them, as one message builds them.
func BenchmarkBuildGraphBatch(b *testing.B) {
	cat := catalog(b, benchdata.Schema)
	body := benchdata.GraphBody(7, 4096)
	recs, err := framing.ParseBytes(body, framing.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		out, err := Build(cat, recs, Append, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if out["node:Person"].Len() != 4096 || out["edge:Knows"].Len() != 4096 {
			b.Fatal("rows")
		}
		for _, t := range out {
			t.Release()
		}
	}
}
