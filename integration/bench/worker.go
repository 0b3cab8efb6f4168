package main

import (
	"context"
	"encoding/json"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/ingest"
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
func startBenchWorker(ctx context.Context, nc *nats.Conn, g *engine.Graph, graph string, fanout, room int) (*benchWorker, error) {
	c := config.Defaults()
	c.Graph, c.CompactionFanout = graph, fanout
	if pipelineDepth > 0 {
		c.PipelineDepth = pipelineDepth
	}
	w, err := ingest.New(nc, g, c.Ingest(), nil)
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
		_ = w.Run(runCtx)
	}()
	b.stop = func() {
		cancel()
		<-ran
		_ = sub.Unsubscribe()
	}
	return b, nil
}
