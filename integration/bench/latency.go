package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// latencyMS are the per-request delays of the latency-store bench, in milliseconds.
var latencyMS = []int{0, 5, 20}

// latencyCommits is how many 8,192-row batches each latency is timed over, after
// latencyWarmup untimed ones (the first commit of a worker also reads the tables it opens).
const (
	latencyCommits = 30
	latencyWarmup  = 2
)

// latencyBench is the sustained bench of e2eBench (a producer publishing 4,096 nodes + 4,096
// edges per batch back to back, the worker committing them) on a graph whose every storage
// request is delayed by L ms, as an object store makes it wait. It goes through NATS and the
// worker like e2e-sustained so that the count includes everything the worker's commit loop
// waits for in storage (the receipt in the publish, the compactions' publishes in its turn), and so
// that the pipeline builds the next batch while one commits, as in production. The root is
// mem://, which has no disk in it: the delay is then all the storage costs.
//
// round_trips_per_commit is the longest chain of sequential storage requests over the timed
// messages (storage.Latency.RoundTrips), divided by their number: the maintenance commits the
// worker makes in its turn are in it, spread over the messages. vs_round_trip_bound is the
// rate over what that chain alone allows, 8,192 rows per (round trips × L). commit_chain_max
// is the longest chain one commit waited for, from its first write to its visibility
// (commitChains), over the timed messages' commits and the maintenance commits among them;
// commit_chain_median is their median. At L = 0 the chains measure nothing about the design
// (requests end before others start), so the bound is n/a.
func latencyBench(ctx context.Context, tmp string) error {
	ns, nc, err := connectNATSProcess(ctx, filepath.Join(tmp, "nats-latency"))
	if err != nil {
		return err
	}
	defer ns.stop()
	defer nc.Close()
	for _, l := range latencyMS {
		if err := latencyRun(ctx, nc, l); err != nil {
			return fmt.Errorf("latency %d ms: %w", l, err)
		}
	}
	return nil
}

// latencyRun is one latency's line: its own graph, streams and worker.
func latencyRun(ctx context.Context, nc *nats.Conn, latMS int) error {
	lat := storage.NewLatency(time.Duration(latMS) * time.Millisecond)
	root, err := storage.Open(ctx, fmt.Sprintf("mem://bench-latency-%d-%d", latMS, time.Now().UnixNano()), storage.WithLatency(lat))
	if err != nil {
		return err
	}
	defer root.Close()
	g, err := engine.Init(ctx, root, benchdata.Schema, engine.InitOptions{FileVersion: fileVersion})
	if err != nil {
		return err
	}
	// As `worker run` runs, automatic compaction included; stopped before the root closes.
	bw, err := startBenchWorker(ctx, nc, g, fmt.Sprintf("latency%d", latMS), config.Defaults().CompactionFanout, latencyCommits+latencyWarmup)
	if err != nil {
		return err
	}
	defer bw.stop()
	cfg, events := bw.cfg, bw.events
	js, _ := jetstream.New(nc)
	if _, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, latencyWarmup, 0); err != nil {
		return err
	}
	rt0, req0 := lat.RoundTrips(), lat.Requests()
	var chains commitChains
	stop := chains.observe(lat)
	sched0 := schedLatencies()
	took, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, latencyCommits, latencyWarmup)
	sched1 := schedLatencies()
	stop()
	if err != nil {
		return err
	}
	chainMax, chainMedian := chains.summary()
	rt := float64(lat.RoundTrips()-rt0) / latencyCommits
	reqs := float64(lat.Requests()-req0) / latencyCommits
	rows := float64(8192*latencyCommits) / took.Seconds()
	bound := "n/a"
	if latMS > 0 {
		bound = fmt.Sprintf("%.2f", rows/(8192/(rt*float64(latMS)/1000)))
	}
	fmt.Printf("bench: e2e-latency-store latency_ms=%d commits_per_s=%.2f rows_per_s=%.0f round_trips_per_commit=%.1f vs_round_trip_bound=%s commit_chain_max=%d commit_chain_median=%s commits=%d requests_per_commit=%.1f pipeline_depth=%d sched_wait_p99_ms=%s sched_wait_p999_ms=%s\n",
		latMS, latencyCommits/took.Seconds(), rows, rt, bound, chainMax, num(chainMedian), len(chains.chains), reqs, cfg.PipelineDepth,
		num(1000*schedQuantile(sched0, sched1, 0.99)), num(1000*schedQuantile(sched0, sched1, 0.999)))
	return nil
}
