package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// A compaction under way counts what it holds (engine.Graph.CompactionBytes) in the worker's
// bound on what is in flight, from before it stages to after it published, and not in the
// process's footprint (the memory limit would rise by its upper bound); then nothing is left
// counted.
func TestCompactionCountsWhatItHolds(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("compaction.after_stage", "sleep(1000)"); err != nil {
		t.Fatal(err)
	}
	fp := &Footprint{}
	h := start(t, func(w *Worker) { w.cfg.CompactionFanout = 2; w.cfg.footprint = fp })
	for i := range 2 {
		h.publish(person(i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	waitFor(t, func() bool { return h.w.compacting.Load() > 0 }, "the compaction to be counted")
	if got := fp.InFlight(); got != 0 {
		t.Fatalf("footprint %d with nothing but the compaction (%d) in flight", got, h.w.compacting.Load())
	}
	waitFor(t, func() bool { return h.w.compacting.Load() == 0 && fp.InFlight() == 0 }, "the count to be given back")
}

// While a compaction is counted, the pipeline prefetches as if that much were in flight: with
// it over the bound, one message waits behind the one that commits, not the pipeline's depth.
func TestPipelineLeavesRoomForTheCompaction(t *testing.T) {
	for _, compacting := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacting=%v", compacting), func(t *testing.T) {
			t.Cleanup(failpoint.Reset)
			if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
				t.Fatal(err)
			}
			h := start(t, func(w *Worker) {
				w.cfg.RetryMax, w.cfg.PipelineBytes = 200*time.Millisecond, 1<<20
				if compacting {
					w.compacting.Store(1 << 20)
				}
			}, depth(8))
			h.publish(person(1), nil)
			waitFor(t, func() bool {
				info, err := h.w.cons.Info(context.Background())
				return err == nil && info.Delivered.Stream >= 1
			}, "the first message")
			for i := 2; i <= 6; i++ {
				h.publish(person(i), nil)
			}
			want := 6
			if compacting {
				want = 2
			}
			waitFor(t, func() bool {
				info, err := h.w.cons.Info(context.Background())
				return err == nil && info.NumAckPending == want
			}, fmt.Sprintf("%d messages in flight", want))
			h.holds(want)
			h.w.compacting.Store(0)
			h.applies(6)
		})
	}
}

// A compaction that would hold more than a quarter of pipeline_bytes is done in the writer's
// turn, not staged beside the messages, where its memory would stack on a full pipeline's.
func TestLargeCompactionIsDoneInline(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	// A staged compaction fails; one done in the writer's turn does not stage.
	if err := failpoint.Enable("compaction.after_stage", "error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.CompactionFanout = 2; w.cfg.PipelineBytes = 64 }, depth(2))
	for i := range 2 {
		h.publish(person(i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	metrics := func() string { return exposition(m) }
	waitFor(t, func() bool { return strings.Contains(metrics(), `omnigraph_compactions_total{result="ok"} 1`) }, "the compaction")
	if !strings.Contains(metrics(), `omnigraph_compactions_total{result="failed"} 0`) {
		t.Fatalf("the compaction was staged:\n%s", metrics())
	}
}

// omnigraph_index_work_bytes reports what the index work due will hold (engine.Graph.
// IndexWorkBytes) after each commit and maintenance pass, and the pipeline does not count it.
func TestIndexWorkIsReported(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("compaction.after_stage", "sleep(1000)"); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(w *Worker) { w.cfg.CompactionFanout, w.cfg.BuildIndices = 16, true; w.UseMetrics(NewMetrics()) })
	h.publish(person(1), map[string]string{HeaderMode: "append"})
	h.event()
	// Person's one row: a BTREE (128 bytes) and two INVERTED builds (320 each), the two largest
	// counted, while they are staged.
	waitFor(t, func() bool { return strings.Contains(exposition(h.w.metrics), "omnigraph_index_work_bytes 640") }, "640 bytes of index work to be reported")
	if n := h.w.compacting.Load(); n != 0 {
		t.Fatalf("the pipeline counts %d bytes for an index build", n)
	}
	waitFor(t, func() bool { return h.w.compacting.Load() == 0 && !h.w.g.IndicesDue(16) }, "the indices to be built")
	waitFor(t, func() bool { return strings.Contains(exposition(h.w.metrics), "omnigraph_index_work_bytes 0") }, "the index work to be reported done")
}

// With build_indices the maintenance beside the messages builds the reference's BTREE
// indices on the tables the messages filled, and omnigraph_unindexed_rows follows each table's
// lag: rows it has not indexed yet, 0 once it has.
func TestMaintenanceBuildsIndicesAndReportsTheLag(t *testing.T) {
	h := start(t, func(w *Worker) { w.cfg.CompactionFanout, w.cfg.BuildIndices = 16, true; w.UseMetrics(NewMetrics()) })
	h.publish(person(1), map[string]string{HeaderMode: "append"})
	h.event()
	waitFor(t, func() bool { return !h.w.g.IndicesDue(16) }, "the indices to be built")
	waitFor(t, func() bool {
		return strings.Contains(exposition(h.w.metrics), `omnigraph_unindexed_rows{table="node:Person"} 0`)
	}, "the lag to be reported as 0")
	// Two more rows beside the one indexed: the lag exceeds the rows covered, a fold is due.
	for i := 2; i <= 3; i++ {
		h.publish(person(i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	waitFor(t, func() bool { return !h.w.g.IndicesDue(16) }, "the indices to be folded")
	if rows := h.w.g.UnindexedRows()["node:Person"]; rows != 0 {
		t.Fatalf("node:Person lags by %d rows after the maintenance", rows)
	}
}
