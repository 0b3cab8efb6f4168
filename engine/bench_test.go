package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/storage"
)

const benchSchema = `
node Person {
    handle: String @key
    name: String
    age: I64
    score: F64
}
edge Knows: Person -> Person {
    since: I64?
}
`

func benchBatch(b *testing.B, k, n int) []framing.Record {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, `{"type":"Person","data":{"handle":"p%d-%d","name":"n%d","age":%d,"score":%g}}`+"\n", k, i, i, i%90, float64(i)*0.5)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, `{"edge":"Knows","from":"p%d-%d","to":"p%d-%d","data":{"id":"k%d-%d","since":%d}}`+"\n", k, i, k, (i+1)%n, k, i, i)
	}
	recs, err := framing.ParseBytes([]byte(sb.String()), framing.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	return recs
}

// BenchmarkLoad1k1k is a strict-insert load of 1,000 nodes and 1,000 edges on a local root.
func BenchmarkLoad1k1k(b *testing.B) {
	ctx := context.Background()
	root, err := storage.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	g, err := Init(ctx, root, benchSchema)
	if err != nil {
		b.Fatal(err)
	}
	batches := make([][]framing.Record, b.N)
	for i := range batches {
		batches[i] = benchBatch(b, i, 1000)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: batches[i]}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMerge100k merges a branch holding 100,000 new Person rows (loaded as strict inserts
// of 8,192 rows) into main by the certified route. Setup is outside the timer.
func BenchmarkMerge100k(b *testing.B) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root, err := storage.Open(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		g, err := Init(ctx, root, benchSchema)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < 100_000; off += MergeChunkRows {
			var sb strings.Builder
			for j := off; j < min(off+MergeChunkRows, 100_000); j++ {
				fmt.Fprintf(&sb, `{"type":"Person","data":{"handle":"m%d","name":"n%d","age":%d,"score":%g}}`+"\n", j, j, j%90, float64(j)*0.5)
			}
			recs, err := framing.ParseBytes([]byte(sb.String()), framing.DefaultLimits())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := g.Load(ctx, LoadRequest{Branch: "s", From: "main", Mode: ModeAppend, Records: recs}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if _, err := g.Merge(ctx, MergeRequest{Source: "s", Target: "main"}); err != nil {
			b.Fatal(err)
		}
	}
}
