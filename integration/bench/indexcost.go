package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/config"
	"github.com/omnigraph/omnigraph-worker/engine"
)

// indexCostRounds is the measured rounds of indexCost, each a block of batches per worker.
const indexCostRounds = 4

// indexCost measures what keeping the reference's index set costs the sustained stream (goal
// sustained-8192-indices-cost): two workers configured as `worker run` is, one with
// build_indices off, each on a fresh graph and in a process of its own (costchild.go), take
// the same 8,192-row batches in alternating rounds (the order flipped each round), so that the
// machine's drift falls on both alike. A worker's round is timed from its first publish to its
// last commit and then until its maintenance is done (no compaction or index fold due): the
// folds a round's rows cause count against that round, not the other worker's. The two graphs
// grow alike, so the folds come at the same sizes in every run. vs_indices_off is the rate
// with indices over the rate without, over all rounds; cpu_vs_indices_off is the same for the
// workers' CPU time (each child's own, over its rounds: neither the publisher in this process
// nor the nats-server process counts): what the upkeep costs in work, whatever the two cores
// did meanwhile. on_faults and off_faults are each child's minor page faults over its rounds.
func indexCost(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, tmp, durability, pipe string, block int) error {
	type side struct {
		*costSide
		took   time.Duration
		cpu    time.Duration // the child's CPU time over its rounds
		faults int64         // the child's minor page faults over its rounds
	}
	start := func(name string, indices bool) (*side, error) {
		s, err := startWorkerChild(ctx, nc, url, filepath.Join(tmp, "graph-cost-"+name), "bench"+name, indices, childDefaultFanout, 0)
		if err != nil {
			return nil, err
		}
		return &side{costSide: s}, nil
	}
	on, err := start("con", true)
	if err != nil {
		return err
	}
	defer on.stop()
	off, err := start("coff", false)
	if err != nil {
		return err
	}
	defer off.stop()

	base := 8_000_000
	run := func(s *side, count int) (time.Duration, error) {
		c0, f0, err := s.settle()
		if err != nil {
			return 0, err
		}
		syscall.Sync() // no dirty pages of the other worker's to write back
		took, c1, f1, err := settledRound(ctx, js, s.costSide, count, base)
		if err != nil {
			return 0, err
		}
		s.cpu += c1 - c0
		s.faults += f1 - f0
		return took, nil
	}
	for _, s := range []*side{on, off} { // warm-up: the first index builds
		if _, err := run(s, 4); err != nil {
			return err
		}
		s.cpu, s.faults = 0, 0
	}
	base += 4
	var ratios []float64
	for round := range indexCostRounds {
		order := []*side{on, off}
		if round%2 == 1 {
			order = []*side{off, on}
		}
		var took [2]time.Duration
		for i, s := range order {
			if took[i], err = run(s, block); err != nil {
				return err
			}
			s.took += took[i]
		}
		base += block
		if round%2 == 1 {
			took[0], took[1] = took[1], took[0]
		}
		ratios = append(ratios, took[1].Seconds()/took[0].Seconds())
	}
	rows := float64(8192 * indexCostRounds * block)
	fmt.Printf("bench: e2e-index-cost durability=%s %s on_rows_per_s=%.0f off_rows_per_s=%.0f vs_indices_off=%.2f cpu_vs_indices_off=%.2f on_cpu_s=%.2f off_cpu_s=%.2f on_faults=%d off_faults=%d rounds=%dx%d round_ratios=%s\n",
		durability, pipe, rows/on.took.Seconds(), rows/off.took.Seconds(), off.took.Seconds()/on.took.Seconds(),
		off.cpu.Seconds()/on.cpu.Seconds(), on.cpu.Seconds(), off.cpu.Seconds(), on.faults, off.faults, indexCostRounds, block, list(ratios))
	return nil
}

// awaitMaintenance waits until g has no compaction due and, with indices, no index to build or
// fold: the worker's maintenance after the last commit is done. At fanout 0 the worker has
// no maintenance (its index work runs beside its compaction), so there is nothing to wait for.
func awaitMaintenance(ctx context.Context, g *engine.Graph, fanout int, indices bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for fanout > 0 && (g.CompactionDue(fanout) || indices && g.IndicesDue(fanout)) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the worker's maintenance did not finish in 2 minutes")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// indexCostBench runs indexCost alone (-only index-cost), on a nats-server process of its own:
// the upkeep goal's line in a minute or two, without the official engine.
func indexCostBench(ctx context.Context, tmp string, block int) error {
	ns, nc, err := connectNATSProcess(ctx, filepath.Join(tmp, "nats-cost"))
	if err != nil {
		return err
	}
	defer ns.stop()
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	pipe := fmt.Sprintf("pipeline_depth=%d", config.Defaults().PipelineDepth)
	return indexCost(ctx, nc, js, ns.url, tmp, durability, pipe, block)
}
