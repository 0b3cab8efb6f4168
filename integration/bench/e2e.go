package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

// e2eBench times publish -> commit -> ack -> event through a real nats-server process and the
// worker, one batch at a time as a producer waiting on each would.
func e2eBench(ctx context.Context, script, tmp string, iters int) error {
	ns, nc, err := connectNATSProcess(ctx, filepath.Join(tmp, "nats"))
	if err != nil {
		return err
	}
	defer ns.stop()
	defer nc.Close()
	g, err := newBenchGraph(ctx, filepath.Join(tmp, "graph-e2e"))
	if err != nil {
		return err
	}
	// The floor first: the e2e lines give their ratio to it.
	if !floorMeasured {
		floorMeasured = true
		if err := floorBench(ctx, nc, script, tmp, iters); err != nil {
			return err
		}
	}
	// The worker runs as `worker run` would, automatic compaction included.
	bw, err := startBenchWorker(ctx, nc, g, "bench", config.Defaults().CompactionFanout, 1)
	if err != nil {
		return err
	}
	defer bw.stop()
	cfg, events := bw.cfg, bw.events
	js, _ := jetstream.New(nc)
	run := func(label string, n, count, base int) ([]float64, time.Duration, error) {
		bodies := make([][]byte, count)
		for k := range bodies {
			bodies[k] = benchdata.GraphBody(base+k, n)
		}
		var lat []float64
		start := time.Now()
		for k := range bodies {
			m := nats.NewMsg(cfg.IngestSubject())
			m.Data = bodies[k]
			m.Header.Set(ingest.HeaderMode, "append")
			t0 := time.Now()
			if _, err := js.PublishMsg(ctx, m); err != nil {
				return nil, 0, err
			}
			if err := awaitEvents(events, 1); err != nil {
				return nil, 0, fmt.Errorf("%s: batch %d: %w", label, k, err)
			}
			lat = append(lat, ms(time.Since(t0)))
		}
		return lat, time.Since(start), nil
	}
	var took time.Duration // over every batch, the warm-up round's included
	base := 0
	goSide := func(k int) ([]float64, error) {
		l, t, err := run("1k+1k", 1000, k, base)
		base += k
		took += t
		return l, err
	}
	var lat, offMS, ratios, twoMS, floorRatios []float64
	if withOfficial { // paired with the official side, as in the graph bench
		o, err := startOfficial(ctx, script, filepath.Join(tmp, "node-e2e-2k"), 2000, 1)
		if err != nil {
			return err
		}
		defer o.close()
		// The unframed floor's official part, the same rows written to the two tables, is
		// timed in each round too, right after the worker's block: the floor measured once,
		// minutes earlier, moved with the machine by more than the goal's margin.
		two, err := startOfficial(ctx, script, filepath.Join(tmp, "node-e2e-2k-two"), 2000, 2)
		if err != nil {
			return err
		}
		defer two.close()
		round := 0
		goThenTwo := func(k int) ([]float64, error) {
			l, err := goSide(k)
			if err != nil {
				return nil, err
			}
			t, err := two.appends(k)
			if err != nil {
				return nil, err
			}
			if round++; round > 1 { // paired's first round is its warm-up
				twoMS = append(twoMS, t...)
				floorRatios = append(floorRatios, median(l)/(floorFig.jetstream1kP50+median(t)))
			}
			return l, nil
		}
		if lat, offMS, ratios, err = paired(o, goThenTwo); err != nil {
			return err
		}
	} else {
		if _, err := goSide(pairedBlock); err != nil { // the warm-up round
			return err
		}
		if lat, err = goSide(pairedRounds * pairedBlock); err != nil {
			return err
		}
	}
	batches := float64(base)
	sorted := append([]float64(nil), lat...)
	sort.Float64s(sorted)
	p99 := sorted[(len(sorted)*99)/100]
	if len(sorted) < 100 {
		p99 = sorted[len(sorted)-1]
	}
	pipe := fmt.Sprintf("pipeline_depth=%d", cfg.PipelineDepth)
	if !withOfficial {
		fmt.Printf("bench: e2e-1k+1k durability=%s %s p50_ms=%.3f p99_ms=%.3f batches_per_s=%.1f rows_per_s=%.0f official=none peak_rss_mib=%.0f\n",
			durability, pipe, median(lat), p99, batches/took.Seconds(), 2000*batches/took.Seconds(), peakRSSMiB())
	} else {
		// vs_floor: the p50 over the unframed floor (JetStream round trip + official two-table
		// append), the median of the rounds' own.
		fmt.Printf("bench: e2e-1k+1k durability=%s %s p50_ms=%.3f p99_ms=%.3f batches_per_s=%.1f rows_per_s=%.0f lance_append_2k_p50_ms=%.3f lance_two_tables_2k_p50_ms=%.3f ratio=%.2f vs_floor=%.2f rounds=%dx%d round_ratios=%s floor_round_ratios=%s peak_rss_mib=%.0f\n",
			durability, pipe, median(lat), p99, batches/took.Seconds(), 2000*batches/took.Seconds(), median(offMS), median(twoMS), median(ratios),
			median(floorRatios), pairedRounds, pairedBlock, list(ratios), list(floorRatios), peakRSSMiB())
	}
	if !withOfficial {
		took8, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, iters, 1_000_000)
		if err != nil {
			return err
		}
		fmt.Printf("bench: e2e-sustained-8192 durability=%s %s rows_per_s=%.0f official=none\n", durability, pipe, float64(8192*iters)/took8.Seconds())
		return nil
	}
	node8, err := nodeRun(ctx, script, filepath.Join(tmp, "node-e2e-8k"), 8192, iters)
	if err != nil {
		return err
	}
	lanceRate := 8192 / (node8.AppendP50 / 1000)
	// vs_writes_only: the stream's rate over the official engine's own two-table writes of the
	// same batches, the two alternating in rounds.
	sp, err := sustainedWithIndices(ctx, nc, js, ns.url, script, tmp, iters)
	if err != nil {
		return err
	}
	fmt.Printf("bench: e2e-sustained-8192 durability=%s %s indices=on rows_per_s=%.0f lance_append_rows_per_s=%.0f ratio=%.2f vs_writes_only=%.2f %s\n",
		durability, pipe, sp.rate, lanceRate, sp.rate/lanceRate, sp.vsWritesOnly, sp.fields())
	// The same stream through a worker that builds no index, on a graph of its own, paired
	// with the official engine as above.
	if sp, err = sustainedWithoutIndices(ctx, nc, js, ns.url, script, tmp, iters); err != nil {
		return err
	}
	fmt.Printf("bench: e2e-sustained-8192 durability=%s %s indices=off rows_per_s=%.0f lance_append_rows_per_s=%.0f ratio=%.2f vs_writes_only=%.2f %s\n",
		durability, pipe, sp.rate, lanceRate, sp.rate/lanceRate, sp.vsWritesOnly, sp.fields())
	// What the reference's index set kept fresh costs the stream, measured worker against
	// worker (goal sustained-8192-indices-cost).
	if err := pairedCost(ctx, nc, js, ns.url, tmp, durability, pipe, iters, indexCostPair); err != nil {
		return err
	}
	// What the automatic compaction costs it, worker against worker (goal
	// sustained-8192-compaction-cost).
	if err := pairedCost(ctx, nc, js, ns.url, tmp, durability, pipe, iters, compactionCostPair); err != nil {
		return err
	}
	// The same stream into a graph whose worker does not compact: the official side's writes
	// do not compact either, so this is the rate at equal work. Without compaction the worker
	// builds no index either (its maintenance does both). What compaction costs is measured
	// worker against worker, by the e2e-compaction-cost line above.
	if sp, err = sustainedWithoutCompaction(ctx, nc, js, ns.url, script, tmp, iters); err != nil {
		return err
	}
	fmt.Printf("bench: e2e-sustained-8192 durability=%s %s compaction_fanout=0 rows_per_s=%.0f lance_append_rows_per_s=%.0f ratio=%.2f vs_writes_only=%.2f %s\n",
		durability, pipe, sp.rate, lanceRate, sp.rate/lanceRate, sp.vsWritesOnly, sp.fields())
	return nil
}

// floorMeasured: the floor involves no local write of the Go side, so it is measured once per
// run, not once per durability.
var floorMeasured bool

// pipelineDepth and withOfficial are the e2e flags.
var (
	pipelineDepth int
	withOfficial  = true
)
