package main

import (
	"context"
	"fmt"
	"os"
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
	dir := filepath.Join(tmp, "nats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ns, err := startNATSProcess(ctx, dir)
	if err != nil {
		return err
	}
	defer ns.stop()
	nc, err := nats.Connect(ns.url)
	if err != nil {
		return err
	}
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
	took8, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, iters, 1_000_000)
	if err != nil {
		return err
	}
	goRate := float64(8192*iters) / took8.Seconds()
	if !withOfficial {
		fmt.Printf("bench: e2e-sustained-8192 durability=%s %s rows_per_s=%.0f official=none\n", durability, pipe, goRate)
		return nil
	}
	node8, err := nodeRun(ctx, script, filepath.Join(tmp, "node-e2e-8k"), 8192, iters)
	if err != nil {
		return err
	}
	lanceRate := 8192 / (node8.AppendP50 / 1000)
	// vs_writes_only: the rate over the official engine's own two-table writes of the same
	// batches, timed right after the stream.
	writesOnly, err := twoTableRate(ctx, script, filepath.Join(tmp, "node-e2e-8k-two"), iters)
	if err != nil {
		return err
	}
	fmt.Printf("bench: e2e-sustained-8192 durability=%s %s rows_per_s=%.0f lance_append_rows_per_s=%.0f ratio=%.2f vs_writes_only=%.2f\n",
		durability, pipe, goRate, lanceRate, goRate/lanceRate, goRate/writesOnly)
	// The same stream into a graph whose worker does not compact: the
	// official side's writes do not compact either, so this is the rate at equal work.
	rate, err := sustainedWithoutCompaction(ctx, nc, js, tmp, iters)
	if err != nil {
		return err
	}
	if writesOnly, err = twoTableRate(ctx, script, filepath.Join(tmp, "node-e2e-8k-two-nc"), iters); err != nil {
		return err
	}
	fmt.Printf("bench: e2e-sustained-8192 durability=%s %s compaction_fanout=0 rows_per_s=%.0f lance_append_rows_per_s=%.0f ratio=%.2f vs_writes_only=%.2f\n",
		durability, pipe, rate, lanceRate, rate/lanceRate, rate/writesOnly)
	return nil
}

// twoTableRate is the official engine's rate, rows per second at its p50, writing iters
// 8,192-row batches split over the two tables as the floor writes them, after two unmeasured.
func twoTableRate(ctx context.Context, script, dir string, iters int) (float64, error) {
	o, err := startOfficial(ctx, script, dir, 8192, 2)
	if err != nil {
		return 0, err
	}
	defer o.close()
	if _, err := o.appends(2); err != nil {
		return 0, err
	}
	t, err := o.appends(iters)
	if err != nil {
		return 0, err
	}
	return 8192 / (median(t) / 1000), nil
}

// sustainedWithoutCompaction is the sustained stream through a worker of its own, on a graph of
// its own, with compaction_fanout 0, after the same warm-up of four batches; rows per second.
func sustainedWithoutCompaction(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, tmp string, iters int) (float64, error) {
	g, err := newBenchGraph(ctx, filepath.Join(tmp, "graph-e2e-nocompact"))
	if err != nil {
		return 0, err
	}
	bw, err := startBenchWorker(ctx, nc, g, "benchnc", 0, 64)
	if err != nil {
		return 0, err
	}
	defer bw.stop()
	cfg, events := bw.cfg, bw.events
	if _, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, 4, 2_000_000); err != nil {
		return 0, err
	}
	took, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, iters, 3_000_000)
	if err != nil {
		return 0, err
	}
	return float64(8192*iters) / took.Seconds(), nil
}

// floorMeasured: the floor involves no local write of the Go side, so it is measured once per
// run, not once per durability.
var floorMeasured bool

// pipelineDepth and withOfficial are the e2e flags.
var (
	pipelineDepth int
	withOfficial  = true
)

// sustained is a producer that publishes count batches of n nodes + n edges back to back,
// without waiting for each to commit (JetStream async publish), and the time until the last
// commit event: the worker's throughput with a queue in front of it.
func sustained(ctx context.Context, js jetstream.JetStream, subject string, events <-chan struct{}, n, count, base int) (time.Duration, error) {
	bodies := make([][]byte, count)
	for k := range bodies {
		bodies[k] = benchdata.GraphBody(base+k, n)
	}
	start := time.Now()
	msgs := make([]*nats.Msg, len(bodies))
	for k := range bodies {
		msgs[k] = nats.NewMsg(subject)
		msgs[k].Data = bodies[k]
		msgs[k].Header.Set(ingest.HeaderMode, "append")
	}
	if err := publishAll(ctx, js, msgs, fmt.Sprintf("%s-%d", subject, base)); err != nil {
		return 0, err
	}
	if err := awaitEvents(events, len(bodies)); err != nil {
		return 0, fmt.Errorf("sustained: %w", err)
	}
	return time.Since(start), nil
}

// publishAll publishes msgs back to back (async), each with a Nats-Msg-Id of prefix and its
// index, and publishes again, one at a time, any that JetStream did not confirm: an async
// publish can fail (a timeout on a loaded machine), and a batch that never reaches the stream
// would leave a bench waiting for its commit. The ids make a retry of a stored one a duplicate.
func publishAll(ctx context.Context, js jetstream.JetStream, msgs []*nats.Msg, prefix string) error {
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for k, m := range msgs {
		m.Header.Set(ingest.HeaderMsgID, fmt.Sprintf("%s-%d", prefix, k))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			return err
		}
		futures[k] = f
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	for k, f := range futures {
		select {
		case <-f.Ok():
			continue
		case <-f.Err():
		}
		if _, err := js.PublishMsg(ctx, msgs[k], jetstream.WithRetryAttempts(5)); err != nil {
			return fmt.Errorf("publish batch %d again: %w", k, err)
		}
	}
	return nil
}
