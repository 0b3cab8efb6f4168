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

// costRounds is the measured rounds of a paired cost line, each a block of batches per worker.
// A round's own ratio swings from about 0.5 to 1.6 (whether a fold or a compaction falls in
// it, and this host's drift), so the line is a total over eight: at four, the line read 0.67
// to 1.06 (index upkeep) and 0.69 to 1.12 (compaction) in one day's runs of one build, most
// of them back to back; at eight, 35 s apart, 0.77 to 0.90 and 0.87 to 1.13 (a run begun
// soon after another's removal of its files pays more for each file it creates:
// docs/performance.md), for about 12 s more a line.
const costRounds = 8

// costPair is what a paired cost line compares: the stream through a worker that does some
// upkeep (on) and through one that does not (off), both otherwise as `worker run` is.
type costPair struct {
	line  string // the bench line's name
	field string // what off is, naming the ratios: vs_<field> (on's rate over off's), cpu_vs_<field>
	on    costWorker
	off   costWorker
}

// costWorker is one side of a costPair: its child's graph name (the profile's name) and
// configuration.
type costWorker struct {
	name    string
	indices bool
	fanout  int
}

// The paired cost lines: what keeping the reference's index set costs (goal
// sustained-8192-indices-cost: both workers compact, one also keeps the indices), and what the
// automatic compaction costs (goal sustained-8192-compaction-cost: neither keeps indices, one
// compacts at the default fanout, the other not at all, as the official engine's appends do).
var (
	indexCostPair = costPair{line: "e2e-index-cost", field: "indices_off",
		on: costWorker{name: "benchcon", indices: true, fanout: childDefaultFanout}, off: costWorker{name: "benchcoff", fanout: childDefaultFanout}}
	compactionCostPair = costPair{line: "e2e-compaction-cost", field: "fanout_0",
		on: costWorker{name: "benchkon", fanout: childDefaultFanout}, off: costWorker{name: "benchkoff", fanout: 0}}
)

// pairedCost measures what pair's upkeep costs the sustained stream: two workers, each on a
// fresh graph and in a process of its own (costchild.go), take the same 8,192-row batches in
// alternating rounds (the order flipped each round), so that the machine's drift falls on
// both alike. A worker's round is timed from its first publish to its last commit and then
// until its maintenance is done (no compaction or index fold due): the maintenance a round's
// rows cause counts against that round, not the other worker's. The two graphs grow alike, so
// the maintenance comes at the same sizes in every run. vs_<field> is the rate of the worker
// with the upkeep over the rate of the one without, over all rounds; cpu_vs_<field> is the
// same for the workers' CPU time (each child's own, over its rounds: neither the publisher in
// this process nor the nats-server process counts): what the upkeep costs in work, whatever
// the two cores did meanwhile. on_faults and off_faults are each child's minor page faults
// over its rounds; create_us what creating a file cost in tmp before each round (createCost).
//
// Measured so, worker against worker, rather than as the quotient of two lines' vs_writes_only
// (each a worker's rate over an official process timed beside it): that quotient divides two
// noisy ratios measured minutes apart on graphs of different histories, and ranged 0.59 to
// 1.70 for the index set in one five-round run, 0.74 to 1.46 for compaction in two.
func pairedCost(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, tmp, durability, pipe string, block int, pair costPair) error {
	type side struct {
		*costSide
		took   time.Duration
		cpu    time.Duration // the child's CPU time over its rounds
		faults int64         // the child's minor page faults over its rounds
	}
	start := func(w costWorker) (*side, error) {
		s, err := startWorkerChild(ctx, nc, url, filepath.Join(tmp, "graph-cost-"+w.name), w.name, w.indices, w.fanout)
		if err != nil {
			return nil, err
		}
		return &side{costSide: s}, nil
	}
	on, err := start(pair.on)
	if err != nil {
		return err
	}
	defer on.stop()
	off, err := start(pair.off)
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
	for _, s := range []*side{on, off} { // warm-up: the first index builds and compactions
		if _, err := run(s, 4); err != nil {
			return err
		}
		s.cpu, s.faults = 0, 0
	}
	base += 4
	var ratios []float64
	var creates []time.Duration // createCost before each round
	for round := range costRounds {
		probe, err := createCost(tmp)
		if err != nil {
			return err
		}
		creates = append(creates, probe)
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
	rows := float64(8192 * costRounds * block)
	fmt.Printf("bench: %s durability=%s %s on_rows_per_s=%.0f off_rows_per_s=%.0f vs_%s=%.2f cpu_vs_%s=%.2f on_cpu_s=%.2f off_cpu_s=%.2f on_faults=%d off_faults=%d rounds=%dx%d round_ratios=%s create_us=%s\n",
		pair.line, durability, pipe, rows/on.took.Seconds(), rows/off.took.Seconds(), pair.field, off.took.Seconds()/on.took.Seconds(),
		pair.field, off.cpu.Seconds()/on.cpu.Seconds(), on.cpu.Seconds(), off.cpu.Seconds(), on.faults, off.faults, costRounds, block, list(ratios), durations(creates, time.Microsecond))
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

// costBench runs the paired cost lines of pairs alone (-only index-cost, compaction-cost), on
// a nats-server process of its own: the upkeep goals' lines in a minute or two each, without
// the official engine.
func costBench(ctx context.Context, tmp string, block int, pairs ...costPair) error {
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
	for _, pair := range pairs {
		if err := pairedCost(ctx, nc, js, ns.url, tmp, durability, pipe, block, pair); err != nil {
			return err
		}
	}
	return nil
}
