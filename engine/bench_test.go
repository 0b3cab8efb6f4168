package engine

import (
	"context"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// BenchmarkLoad1k1k is a strict-insert load of 1,000 nodes and 1,000 edges on a local root.
func BenchmarkLoad1k1k(b *testing.B) { benchLoads(b, 1000) }

// BenchmarkLoad4k4k is the sustained-throughput batch: 4,096 nodes and 4,096 edges.
func BenchmarkLoad4k4k(b *testing.B) { benchLoads(b, 4096) }

// benchLoads times one strict-insert load of n nodes and n edges per iteration on a fresh graph
// held as the worker holds it (with spare files). Each batch is framed outside the timer, and
// only one is alive at a time, so the collector sees the heap a worker has, not b.N batches.
func benchLoads(b *testing.B, n int) {
	ctx := context.Background()
	root, err := storage.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer root.Close()
	storage.KeepSpares(root)
	g, err := Init(ctx, root, benchdata.Schema)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		batch := benchdata.GraphBatch(i, n)
		b.StartTimer()
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: batch}); err != nil {
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
		g, err := Init(ctx, root, benchdata.Schema)
		if err != nil {
			b.Fatal(err)
		}
		for off := 0; off < 100_000; off += MergeChunkRows {
			recs := benchdata.People(off, min(MergeChunkRows, 100_000-off))
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
