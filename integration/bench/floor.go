package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
)

// floorBench prices the parts of the e2e goals' work that no implementation of the message
// contract can skip, each with the cheapest tool there is for it:
//
//   - the JetStream path (publish, pull delivery with one message in flight, AckSync, a core
//     NATS event), driven by a consumer that does nothing else;
//   - the official engine itself writing the batch's two tables, nodes and edges, concurrently
//     (the OmniGraph layout stores each type in its own Lance dataset);
//   - framing the NDJSON body, with this project's parser (the only one measured here).
//
// Each is divided by the goal's own yardstick, one official append of the same rows to one
// table, measured alternately with the two-table append. The floor ratio is what a worker
// whose own code cost nothing would reach; the goals (e2e p50 ≤ 1.5, sustained ≥ 0.8) are
// only reachable where they lie beyond it.
func floorBench(ctx context.Context, nc *nats.Conn, script, tmp string, iters int) error {
	w, err := ingest.New(nc, nil, ingest.Config{Graph: "floor"}, nil)
	if err != nil {
		return err
	}
	if err := w.Setup(ctx); err != nil {
		return err
	}
	cfg := w.Config()
	js, _ := jetstream.New(nc)
	cons, err := js.Consumer(ctx, cfg.Stream, cfg.Consumer)
	if err != nil {
		return err
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return err
	}
	defer it.Stop()
	go func() { // the no-op worker: ack, then announce, as the worker does after a commit
		for {
			msg, err := it.Next()
			if err != nil {
				return
			}
			if msg.DoubleAck(ctx) == nil {
				_ = nc.Publish(cfg.EventSubject(), []byte(`{}`))
			}
		}
	}()
	events := make(chan struct{}, 64)
	sub, err := nc.Subscribe(cfg.EventSubject(), func(*nats.Msg) { events <- struct{}{} })
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()

	// 1k+1k, one producer waiting on each batch.
	body := benchdata.GraphBody(0, 1000)
	var jsMS []float64
	for k := 0; k < pairedRounds*pairedBlock; k++ {
		m := nats.NewMsg(cfg.IngestSubject())
		m.Data = body
		t0 := time.Now()
		if _, err := js.PublishMsg(ctx, m); err != nil {
			return err
		}
		if err := awaitEvents(events, 1); err != nil {
			return err
		}
		jsMS = append(jsMS, ms(time.Since(t0)))
	}
	frame, err := framingMS(body, pairedRounds*pairedBlock)
	if err != nil {
		return err
	}
	floorFig.jetstream1kP50 = median(jsMS)
	if !withOfficial {
		fmt.Printf("bench: e2e-floor-1k+1k jetstream_p50_ms=%.3f framing_p50_ms=%.3f official=none\n", median(jsMS), median(frame))
		return nil
	}
	one, two, err := oneVersusTwoTables(ctx, script, filepath.Join(tmp, "floor-2k"), 2000)
	if err != nil {
		return err
	}
	j, o, t := median(jsMS), median(one), median(two)
	fmt.Printf("bench: e2e-floor-1k+1k jetstream_p50_ms=%.3f framing_p50_ms=%.3f lance_two_tables_p50_ms=%.3f lance_append_2k_p50_ms=%.3f floor_ratio=%.2f floor_ratio_framed=%.2f\n",
		j, median(frame), t, o, (j+t)/o, (j+median(frame)+t)/o)

	// 4k+4k back to back, as the sustained measurement publishes them.
	took, err := sustained(ctx, js, cfg.IngestSubject(), events, 4096, iters, 0)
	if err != nil {
		return err
	}
	one, two, err = oneVersusTwoTables(ctx, script, filepath.Join(tmp, "floor-8k"), 8192)
	if err != nil {
		return err
	}
	if frame, err = framingMS(benchdata.GraphBody(0, 4096), iters); err != nil {
		return err
	}
	perBatch := ms(took) / float64(iters)
	o, t = median(one), median(two)
	fmt.Printf("bench: e2e-floor-sustained-8192 jetstream_ms_per_batch=%.3f framing_p50_ms=%.3f lance_two_tables_p50_ms=%.3f lance_append_8k_p50_ms=%.3f writes_only_ratio=%.2f floor_ratio=%.2f floor_ratio_framed=%.2f\n",
		perBatch, median(frame), t, o, o/t, o/(perBatch+t), o/(perBatch+median(frame)+t))
	return nil
}

// floorFig is what the e2e lines take from the floor: its JetStream round trip (1k+1k). The
// official two-table appends they divide by are timed beside their own rounds.
var floorFig struct{ jetstream1kP50 float64 }

// oneVersusTwoTables alternates official appends of rows fresh rows to one table with appends
// of the same count split over two tables written concurrently.
func oneVersusTwoTables(ctx context.Context, script, dir string, rows int) (one, two []float64, err error) {
	o1, err := startOfficial(ctx, script, filepath.Join(dir, "one"), rows, 1)
	if err != nil {
		return nil, nil, err
	}
	defer o1.close()
	o2, err := startOfficial(ctx, script, filepath.Join(dir, "two"), rows, 2)
	if err != nil {
		return nil, nil, err
	}
	defer o2.close()
	two, one, _, err = paired(o1, o2.appends) // the two-table process stands where Go would
	return one, two, err
}

// framingMS times n framings of body with the worker's limits.
func framingMS(body []byte, n int) ([]float64, error) {
	out := make([]float64, 0, n)
	for k := 0; k < n; k++ {
		t0 := time.Now()
		if _, err := framing.ParseBytes(body, framing.DefaultLimits()); err != nil {
			return nil, err
		}
		out = append(out, ms(time.Since(t0)))
	}
	return out, nil
}

// awaitEvents waits for n commit events.
func awaitEvents(events <-chan struct{}, n int) error {
	for k := 0; k < n; k++ {
		select {
		case <-events:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("no event for batch %d", k)
		}
	}
	return nil
}
