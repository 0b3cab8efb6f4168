package engine

import (
	"context"
	"os"
	"syscall"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// BenchmarkLoad1k1k is a strict-insert load of 1,000 nodes and 1,000 edges on a local root.
func BenchmarkLoad1k1k(b *testing.B) { benchLoads(b, 1000) }

// BenchmarkLoad4k4k is the sustained-throughput batch: 4,096 nodes and 4,096 edges.
func BenchmarkLoad4k4k(b *testing.B) { benchLoads(b, 4096) }

// benchGraph is a fresh graph of the bench schema held as the worker holds it (with spare
// files), synced as BENCH_FSYNC says (off: not at all).
func benchGraph(b *testing.B) *Graph {
	ctx := context.Background()
	root, err := storage.Open(ctx, b.TempDir(), storage.WithLocalFsync(os.Getenv("BENCH_FSYNC") != "off"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { root.Close() })
	storage.KeepSpares(root)
	g, err := Init(ctx, root, benchdata.Schema)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// benchLoads times one strict-insert load of n nodes and n edges per iteration on a fresh graph
// held as the worker holds it (with spare files). Each batch is framed outside the timer, and
// only one is alive at a time, so the collector sees the heap a worker has, not b.N batches.
func benchLoads(b *testing.B, n int) {
	ctx := context.Background()
	g := benchGraph(b)
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

// BenchmarkMaintainedLoadsIndicesOn and ...Off load 64 batches of 8,192 nodes and 8,192 edges
// onto a fresh graph, running the worker's maintenance (compaction, and with indices the
// reference's index set built and folded) after each as its compactor does, and report the
// process's CPU time per batch (cpu_ms/batch): the cost of keeping the indices, without the
// noise of the end-to-end bench's rounds. load_ms/batch and maint_ms/batch split it between
// the loads and the maintenance (the batches' generation is the rest). One iteration is the
// whole sequence (-benchtime 1x).
func BenchmarkMaintainedLoadsIndicesOn(b *testing.B)  { benchMaintained(b, true) }
func BenchmarkMaintainedLoadsIndicesOff(b *testing.B) { benchMaintained(b, false) }

func benchMaintained(b *testing.B, indices bool) {
	ctx := context.Background()
	const batches = 64
	for range b.N {
		b.StopTimer()
		root, err := storage.Open(ctx, b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		storage.KeepSpares(root)
		g, err := Init(ctx, root, benchdata.Schema)
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := processCPU()
		var loadCPU, maintCPU int64
		b.StartTimer()
		for k := 0; k < batches; k++ {
			recs := benchdata.GraphBatch(8_000_000+k, 8192) // fixed width: keys that only grow, as `make bench` publishes
			c0 := processCPU()
			if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: recs}); err != nil {
				b.Fatal(err)
			}
			c1 := processCPU()
			loadCPU += c1 - c0
			o := OptimizeOptions{Indices: indices}
			if !g.CompactionDue(o.Fanout) && !(indices && g.IndicesDue(o.Fanout)) {
				continue
			}
			sc, err := g.StageCompaction(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			if sc != nil {
				if _, err := g.CommitCompaction(ctx, sc); err != nil {
					b.Fatal(err)
				}
			}
			maintCPU += processCPU() - c1
		}
		b.StopTimer()
		b.ReportMetric(float64(processCPU()-cpu0)/1e6/batches, "cpu_ms/batch")
		b.ReportMetric(float64(loadCPU)/1e6/batches, "load_ms/batch")
		b.ReportMetric(float64(maintCPU)/1e6/batches, "maint_ms/batch")
		root.Close()
	}
}

// processCPU is the process's user and system CPU time so far, in nanoseconds.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkCommitTurn8k8k is the serving worker's commit loop alone: one strict-insert load
// of 8,192 nodes and 8,192 edges per iteration, its rows built ahead (as the worker's stager
// builds them, and encodes their data files) before the timer starts, so the time is the
// loads' turn at the write gate one after another, with whatever each leaves running beside the
// next (fold.go).
func BenchmarkCommitTurn8k8k(b *testing.B) { benchCommitTurn(b, ModeAppend, false) }

// BenchmarkCommitTurn8k8kWrittenAhead is BenchmarkCommitTurn8k8k with each batch's data files
// also written ahead (Built.WriteAhead), as the worker's stager writes them: the turn only
// commits.
func BenchmarkCommitTurn8k8kWrittenAhead(b *testing.B) { benchCommitTurn(b, ModeAppend, true) }

// BenchmarkCommitTurn8k8kMergeWrittenAhead is the commit loop of merges that each replace
// every row of the one before (the same 8,192 nodes and 8,192 edges, merged again), their
// data files written ahead: the turn stages the deletion files masking the replaced rows and
// commits.
func BenchmarkCommitTurn8k8kMergeWrittenAhead(b *testing.B) { benchCommitTurn(b, ModeMerge, true) }

func benchCommitTurn(b *testing.B, mode Mode, writeAhead bool) {
	ctx := context.Background()
	g := benchGraph(b)
	var err error
	// One load first: a serving worker builds (and encodes) its batches for the tables its last
	// loads committed.
	if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(8_999_999, 8192)}); err != nil {
		b.Fatal(err)
	}
	reqs := make([]LoadRequest, b.N)
	for i := range reqs {
		batch := 9_000_000 + i
		if mode == ModeMerge {
			batch = 8_999_999 // the rows the load before wrote, replaced
		}
		reqs[i] = LoadRequest{Mode: mode, Records: benchdata.GraphBatch(batch, 8192)}
		if reqs[i].Built, err = g.Build(reqs[i]); err != nil {
			b.Fatal(err)
		}
		if writeAhead {
			if err := reqs[i].Built.WriteAhead(ctx); err != nil {
				b.Fatal(err)
			}
		}
		reqs[i].Records = nil
	}
	b.ResetTimer()
	for i := range reqs {
		if _, err := g.Load(ctx, reqs[i]); err != nil {
			b.Fatal(err)
		}
		reqs[i] = LoadRequest{} // the worker drops a batch once it is committed
	}
}
