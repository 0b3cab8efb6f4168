package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/hugepage"
)

// benchWorker is an ingest worker of one graph in this process, configured as `worker run`
// would be (its -pipeline-depth applied), with a channel that gets one value per event it
// publishes.
type benchWorker struct {
	cfg    ingest.Config
	events chan struct{}
	stop   func() // ends the worker and waits for it: before its graph's root closes
}

// startBenchWorker sets up and runs the worker of graph on g at compaction fanout, its events
// counted on a channel of room values (a full one holds the subscription back).
func startBenchWorker(ctx context.Context, nc *nats.Conn, g *engine.Graph, graph string, fanout, room int, opts ...func(*config.Config)) (*benchWorker, error) {
	c := config.Defaults()
	c.Graph, c.CompactionFanout = graph, fanout
	for _, o := range opts {
		o(&c)
	}
	if pipelineDepth > 0 {
		c.PipelineDepth = pipelineDepth
	}
	log, err := benchWorkerLog(graph)
	if err != nil {
		return nil, err
	}
	w, err := ingest.New(nc, g, c.Ingest(), log)
	if err != nil {
		return nil, err
	}
	if err := w.Setup(ctx); err != nil {
		return nil, err
	}
	b := &benchWorker{cfg: w.Config(), events: make(chan struct{}, room)}
	sub, err := nc.Subscribe(b.cfg.EventSubject(), func(m *nats.Msg) {
		var ev ingest.Event
		if json.Unmarshal(m.Data, &ev) == nil {
			b.events <- struct{}{}
		}
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		// Labelled, so that a -cpuprofile of a run with several workers tells them apart
		// (go tool pprof -tagfocus graph=NAME): the goroutines the worker starts inherit it.
		pprof.Do(runCtx, pprof.Labels("graph", graph), func(ctx context.Context) { _ = w.Run(ctx) })
	}()
	b.stop = func() {
		cancel()
		<-ran
		_ = sub.Unsubscribe()
	}
	return b, nil
}

// workerLog is the file the e2e workers log to at info (-worker-log); "" logs nothing.
var workerLog string

// benchWorkerLog is graph's worker's logger: nil (none) unless -worker-log names a file.
func benchWorkerLog(graph string) (*zap.Logger, error) {
	if workerLog == "" {
		return nil, nil
	}
	cfg := zap.NewProductionConfig()
	cfg.OutputPaths, cfg.Sampling = []string{workerLog}, nil
	l, err := cfg.Build()
	if err != nil {
		return nil, fmt.Errorf("-worker-log: %w", err)
	}
	return l.With(zap.String("bench_graph", graph)), nil
}

// hugePageHeapEnv is `worker run`'s variable for huge_page_heap, which every process of the
// bench (children included: they inherit it) honours as `worker run` does, so that an A/B
// run sets it to 0 for one side.
var hugePageHeapEnv = config.EnvName("huge_page_heap")

// adviseHeap backs this process's heap with huge pages as `worker run` does (huge_page_heap);
// it must run before the heap has memory of its own to reuse.
func adviseHeap() {
	n := config.Defaults().HugePageHeap
	if v := os.Getenv(hugePageHeapEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "%s=%q: want a byte count\n", hugePageHeapEnv, v)
			os.Exit(2)
		}
	}
	if _, err := hugepage.AdviseHeap(n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
}
