package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/internal/hugepage"
)

// sustainedRounds is the measured rounds of a paired sustained measurement.
const sustainedRounds = 2

// pairedSustained is a paired sustained measurement (sustainedPaired).
type pairedSustained struct {
	rate         float64   // the worker's rows per second, over every round
	vsWritesOnly float64   // rate over the official engine's two-table rate, over every round
	ratios       []float64 // the same, round by round
	official     float64   // the official engine's rows per second, over every round
	block        int       // batches per round and side
	// The CPU time of the worker's process and of the official one over the rounds, per row:
	// what each side's work costs, which the two cores' scheduling and the machine's drift
	// (the wall-clock ratio of one line moves by a third between runs) blur far less. The
	// worker's includes consuming the messages and its maintenance; neither includes the
	// producer's or the nats-server's.
	workerCPUPerRow, officialCPUPerRow time.Duration
	// workerFaults are the minor page faults of the worker's process over the rounds: one per
	// page its heap grew into (4 KiB, or 2 MiB where huge_page_heap advised it), each costing
	// what first_touch_ms_per_mib says the host charged at the time.
	workerFaults int64
	// roundCPU is the worker process's CPU time round by round. The rounds load batches of
	// one shape, so where they differ, the process's state (a fold due, a heap growing) or
	// the host moved, not the work.
	roundCPU []time.Duration
	// createCost is what creating a file cost in the lines' directory just before each
	// worker round (createCost): a figure of the host's state that moves both sides' cost.
	createCost []time.Duration
	// touchSmall and touchHuge are what a first touch of fresh memory cost per MiB in 4 KiB
	// and in 2 MiB pages before the line's warm-up (hugepage.FirstTouch): the other figure of
	// the host's that moves a young process's cost, and which page size it favours has changed
	// under this guest (performance.md, thirty-second session).
	touchSmall, touchHuge time.Duration
}

func (p pairedSustained) fields() string {
	cpuVs := "n/a"
	if p.workerCPUPerRow > 0 && p.officialCPUPerRow > 0 {
		cpuVs = fmt.Sprintf("%.2f", p.officialCPUPerRow.Seconds()/p.workerCPUPerRow.Seconds())
	}
	return fmt.Sprintf("lance_two_tables_rows_per_s=%.0f rounds=%dx%d round_ratios=%s cpu_vs_writes_only=%s worker_cpu_ns_per_row=%d official_cpu_ns_per_row=%d worker_faults=%d worker_round_cpu_ms=%s create_us=%s first_touch_ms_per_mib=%.2f/%.2f",
		p.official, len(p.ratios), p.block, list(p.ratios), cpuVs, p.workerCPUPerRow.Nanoseconds(), p.officialCPUPerRow.Nanoseconds(), p.workerFaults, durations(p.roundCPU, time.Millisecond), durations(p.createCost, time.Microsecond),
		msPerMiB(p.touchSmall), msPerMiB(p.touchHuge))
}

// sustainedPaired measures the sustained stream against the official engine's own writes of the
// same 8,192-row batches to two tables (one bench-serve process in dir, its tables growing as
// the graph does), in sustainedRounds alternating rounds of block batches per side, after a
// warm-up of block batches on each side, into the graph and the tables the rounds go on to
// write: this machine drifts by tens of percent within a minute, so the two sides are timed
// seconds apart, not minutes, each from a page cache the other left clean. The warm-up streams
// through the measured worker itself, so that its process's heap has grown with its own graph
// as a worker's that has been running for a while has, and the official tables hold as many
// rows as the graph when the rounds begin. (Until the twenty-eighth session the child streamed
// its warm-up through a worker on a scratch graph and measured a fresh one: the scratch graph
// stayed in the heap until the collector next ran, so the first round grew the heap into fresh
// pages, which cost the worker without indices half as much CPU again as its second round.)
// A round of the worker is timed from its first publish to its last commit event (its
// pipeline filling included, which costs it a few percent of a 30-batch round) and then until
// its maintenance is done (no compaction or index fold due), as the index-cost line's rounds
// are: a fold or compaction the round's last batches made due is the round's work, and left
// running it would take a core from the official side's round that follows. The official
// round is the sum of its appends. Every round counts, compactions included: vsWritesOnly
// divides the rows per second over all rounds, not a median, so a round that paid for a
// compaction weighs in. cpu_vs_writes_only is the official process's CPU time over the worker
// process's, over the same rounds (pairedSustained).
func sustainedPaired(ctx context.Context, script, dir string, js jetstream.JetStream, w *costSide, block, base int) (pairedSustained, error) {
	res := pairedSustained{block: block}
	two, err := startOfficial(ctx, script, dir, 8192, 2)
	if err != nil {
		return res, err
	}
	defer two.close()
	// Before the warm-up: the probe frees its memory, which the next process to fault takes
	// back cheaply for a while; the warm-up, not a measured round, should be that process.
	if res.touchSmall, res.touchHuge, err = hugepage.FirstTouch(touchProbeBytes); err != nil {
		return res, err
	}
	_, cpuBefore, faultsBefore, err := settledRound(ctx, js, w, block, base) // the warm-up; the child's totals so far
	if err != nil {
		return res, err
	}
	if _, err := two.appends(block); err != nil {
		return res, err
	}
	var goTotal, offTotal, goCPU, offCPU time.Duration
	for round := range sustainedRounds {
		// Each side starts with no dirty pages of the other's to write back: without fsync,
		// one side's writes are flushed by the kernel during the next side's round, and the
		// writer that finds the page cache over its dirty limit is made to wait for them.
		syscall.Sync()
		probe, err := createCost(filepath.Dir(dir))
		if err != nil {
			return res, err
		}
		res.createCost = append(res.createCost, probe)
		took, cpu, faults, err := settledRound(ctx, js, w, block, base+(1+round)*block)
		if err != nil {
			return res, err
		}
		syscall.Sync()
		ms, err := two.appends(block)
		if err != nil {
			return res, err
		}
		off := time.Duration(sum(ms) * float64(time.Millisecond))
		res.ratios = append(res.ratios, off.Seconds()/took.Seconds())
		goTotal += took
		offTotal += off
		goCPU += cpu - cpuBefore
		res.roundCPU = append(res.roundCPU, cpu-cpuBefore)
		cpuBefore = cpu
		res.workerFaults += faults - faultsBefore
		faultsBefore = faults
		offCPU += two.cpu
	}
	rows := float64(8192 * sustainedRounds * block)
	res.rate, res.official = rows/goTotal.Seconds(), rows/offTotal.Seconds()
	res.workerCPUPerRow = time.Duration(float64(goCPU) / rows)
	res.officialCPUPerRow = time.Duration(float64(offCPU) / rows)
	res.vsWritesOnly = res.rate / res.official
	return res, nil
}

// sustainedWithIndices is sustainedPaired through a worker configured as `worker run` is, on
// a graph of its own, against an official process of its own: the line of goal
// sustained-8192-none (and -fsync).
func sustainedWithIndices(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, script, tmp string, block int) (pairedSustained, error) {
	return sustainedOwnWorker(ctx, nc, js, url, script, tmp, "si", block, 1_000_000, true, childDefaultFanout)
}

// sustainedWithoutCompaction is sustainedPaired through a worker of its own, on a graph of its
// own, with compaction_fanout 0, against an official process of its own. At fanout 0 the
// worker has no maintenance at all: its index work runs beside its compaction, so this worker
// keeps no index either (build_indices needs a fanout). (What compaction costs is measured
// worker against worker: pairedCost's compactionCostPair.)
func sustainedWithoutCompaction(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, script, tmp string, block int) (pairedSustained, error) {
	return sustainedOwnWorker(ctx, nc, js, url, script, tmp, "nc", block, 3_000_000, false, 0)
}

// sustainedOwnWorker is sustainedPaired through a worker of its own (graph "bench"+name,
// build_indices indices, compaction_fanout fanout or childDefaultFanout) in a process of its
// own (costchild.go) consuming from the nats-server at url, on a fresh graph, against an
// official process of its own; base numbers the batches' ids. In the bench's own process, a
// line's worker shared its heap with the lines before it (which line came first moved a ratio
// by a third), and the line with indices ran on the graph the 1k+1k line had loaded, against
// official tables that started empty.
func sustainedOwnWorker(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, script, tmp, name string, block, base int, indices bool, fanout int) (pairedSustained, error) {
	w, err := startWorkerChild(ctx, nc, url, filepath.Join(tmp, "graph-e2e-"+name), "bench"+name, indices, fanout)
	if err != nil {
		return pairedSustained{}, err
	}
	defer w.stop()
	return sustainedPaired(ctx, script, filepath.Join(tmp, "node-e2e-8k-two-"+name), js, w, block, base)
}

// durations is ds in whole units, comma-separated.
func durations(ds []time.Duration, unit time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = strconv.FormatInt(int64(d/unit), 10)
	}
	return strings.Join(parts, ",")
}

func sum(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t
}

// settledRound is one worker round of sustainedPaired and pairedCost: count batches published
// to the worker of child w (ids from base on), timed from the first publish until the last
// commit and then until the worker has no maintenance due; with the child's CPU time and minor
// page faults at the end (the process's totals so far).
func settledRound(ctx context.Context, js jetstream.JetStream, w *costSide, count, base int) (took, cpu time.Duration, faults int64, err error) {
	bodies := graphBodies(4096, count, base) // made before the clock starts: not the worker's work
	t0 := time.Now()
	if _, err := publishAwait(ctx, js, w.subject, w.events, bodies, base); err != nil {
		return 0, 0, 0, err
	}
	if cpu, faults, err = w.settle(); err != nil {
		return 0, 0, 0, err
	}
	return time.Since(t0), cpu, faults, nil
}

// sustained is a producer that publishes count batches of n nodes + n edges back to back,
// without waiting for each to commit (JetStream async publish): the worker's throughput with a
// queue in front of it, timed until the last commit event.
func sustained(ctx context.Context, js jetstream.JetStream, subject string, events <-chan struct{}, n, count, base int) (time.Duration, error) {
	return publishAwait(ctx, js, subject, events, graphBodies(n, count, base), base)
}

// graphBodies are the bodies of count batches of n nodes and n edges, from batch base on.
func graphBodies(n, count, base int) [][]byte {
	bodies := make([][]byte, count)
	for k := range bodies {
		bodies[k] = benchdata.GraphBody(base+k, n)
	}
	return bodies
}

// publishAwait publishes bodies as appends (their ids from base on) and waits for their
// commits: the time from the first publish to the last commit event.
func publishAwait(ctx context.Context, js jetstream.JetStream, subject string, events <-chan struct{}, bodies [][]byte, base int) (time.Duration, error) {
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

// sustainedWithoutIndices is sustainedPaired through a worker of its own that compacts as
// `worker run` does but builds no index (build_indices off), on a graph of its own, against an
// official process of its own. (What the index set costs is measured worker against worker:
// pairedCost.)
func sustainedWithoutIndices(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, url, script, tmp string, block int) (pairedSustained, error) {
	return sustainedOwnWorker(ctx, nc, js, url, script, tmp, "ni", block, 5_000_000, false, childDefaultFanout)
}
