package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/benchdata"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// loadRoundTrips is the most sequential storage round trips a load of a warm graph (its tables
// and manifest cached) waits for: the revalidation (the listing of __recovery that also stands
// for the heal's, the accepted schema, the manifest, the tables, at once; the preparation
// before it asks storage nothing) beside the sidecar and the data files; the table commits;
// the confirmation beside the publish's files; the publish; the retirement.
const loadRoundTrips = 5

var latencySeq atomic.Int64

// roundTripDelay is the delay of the tests that count round trips. The count is by time: a
// request that starts after another ended is counted after it, so a writer whose goroutine
// was not scheduled for a whole delay (a loaded race-detector run) shows a round trip more
// than it waits for. 25 and then 50 ms were each beaten once in CI (a publish's files issued a
// delay after the confirmation beside them, CI on 38e0b84); unloaded the gap is under 1 ms.
// The tests run in parallel: they wait on timers, not on the CPU.
const roundTripDelay = 150 * time.Millisecond

// On an object store every sequential request costs a round trip: a load's independent
// requests go out together, so it waits for loadRoundTrips of them however many tables it
// writes. The delay only makes concurrent requests overlap for certain; the count is of
// requests, not of time.
//
// A writer that retires its sidecars in the background (RetireInBackground, the serving
// worker) waits for one fewer: the deletion runs beside the next load's revalidation, whose
// listing of __recovery leaves it out (were it healed over, the load would wait for more).
func TestLoadRoundTrips(t *testing.T) {
	t.Parallel()
	t.Run("retire_in_turn", func(t *testing.T) { loadRoundTripsOf(t, false, loadRoundTrips) })
	t.Run("retire_in_background", func(t *testing.T) { loadRoundTripsOf(t, true, loadRoundTrips-1) })
}

// latencyGraph is a new bench-schema graph on a mem:// root whose every request waits d, and
// the latency that counts its round trips.
func latencyGraph(t *testing.T, name string, d time.Duration) (*Graph, *storage.Latency) {
	t.Helper()
	ctx := context.Background()
	l := storage.NewLatency(d)
	root, err := storage.Open(ctx, fmt.Sprintf("mem://%s-%d", name, latencySeq.Add(1)), storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Init(ctx, root, benchdata.Schema)
	if err != nil {
		t.Fatal(err)
	}
	return g, l
}

func loadRoundTripsOf(t *testing.T, background bool, want int) {
	ctx := context.Background()
	g, l := latencyGraph(t, "load-round-trips", roundTripDelay)
	if background {
		g.RetireInBackground()
	}
	defer noSidecars(t, g)
	defer g.WaitRetired()
	loadRoundTrips := int64(want)
	for i := range 4 {
		var trace []string
		l.Trace(func(r storage.Request) { trace = append(trace, fmt.Sprintf("%d %s %s", r.Depth, r.Op, r.Location)) })
		rt0 := l.RoundTrips()
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(i, 100)}); err != nil {
			t.Fatal(err)
		}
		if rt := l.RoundTrips() - rt0; i > 0 && rt > loadRoundTrips {
			t.Fatalf("load %d waited for %d sequential round trips, want at most %d:\n%s", i, rt, loadRoundTrips, strings.Join(trace, "\n"))
		}
	}
}

// Every publisher.CompactionFanout-th publish completes the newest tier of __manifest's
// fragments, and merges it in its own commit: the load waits for no more round trips than
// another (the tier's files are the ones this process just wrote, read from memory), makes no
// __manifest commit of its own for the merge, and the fragment count stays bounded. Merged in
// a commit of its own after the publish, it cost 5 round trips more (reads of the tier, the
// merged file, its commit, a read of its ids). Publishes write few deletion files.
func TestManifestTailMergedByThePublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, l := latencyGraph(t, "tail-round-trips", roundTripDelay)
	g.RetireInBackground()
	defer g.WaitRetired()
	const loads = publisher.CompactionFanout + 2
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	v0 := st.ManifestVersion
	deletionFiles := 0
	for i := range loads {
		var trace []string
		l.Trace(func(r storage.Request) {
			trace = append(trace, fmt.Sprintf("%d %s %s", r.Depth, r.Op, r.Location))
			if r.Op == "put" && strings.Contains(r.Location, "/__manifest/_deletions/") {
				deletionFiles++
			}
		})
		before := l.RoundTrips()
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(i, 10)}); err != nil {
			t.Fatal(err)
		}
		l.Trace(nil)
		if rt := l.RoundTrips() - before; i > 0 && rt > loadRoundTrips-1 {
			t.Fatalf("load %d waited for %d sequential round trips, want at most %d:\n%s", i, rt, loadRoundTrips-1, strings.Join(trace, "\n"))
		}
	}
	// Each publish replaces the graph head and table versions the last ones wrote; in the
	// newest small fragments, those are rewritten with the publish's rows, not masked by a
	// deletion file (one per publish before).
	if deletionFiles > loads/4 {
		t.Fatalf("%d publishes wrote %d __manifest deletion files, want at most %d", loads, deletionFiles, loads/4)
	}
	if st, err = g.Snapshot(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if n := st.ManifestVersion - v0; n != loads {
		t.Fatalf("%d loads made %d __manifest commits, want one each", loads, n)
	}
	ds, err := lance.Open(ctx, g.root.Sub(publisher.Dir))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ds.Manifest().Fragments); n >= publisher.CompactionFanout {
		t.Fatalf("__manifest has %d fragments after %d publishes: its tail was not merged", n, loads)
	}
}

// A load prepares first on what its writer holds, without asking storage (TestLoadRoundTrips);
// what another writer published meanwhile must still decide it. Another handle on the same root
// stands for that writer: its append is kept and a key it added is refused, and a key it
// removed (an overwrite) is not refused on the stale view, since a refusal is judged on what
// storage holds.
func TestLoadOnStaleViewJudgedOnStorage(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", person("a", "A"), person("b", "B"))
	other, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	loadInto(t, other, "", "", "append", person("c", "C"))
	loadInto(t, g, "", "", "append", person("d", "D")) // g's view still lacks c
	out := export(t, g, "")
	for _, h := range []string{"a", "b", "c", "d"} {
		if strings.Count(out, fmt.Sprintf(`"handle":%q`, h)) != 1 {
			t.Fatalf("%s not there once:\n%s", h, out)
		}
	}
	loadInto(t, other, "", "", "append", person("e", "E"))
	if _, err := load(t, g, "append", person("e", "again")); errs.Kind(err) != errs.KindKeyConflict {
		t.Fatalf("a key another writer added: %v", err)
	}
	if _, err := other.Load(ctx, LoadRequest{Mode: ModeOverwrite, Records: records(t, person("z", "Z"))}); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "append", person("a", "A again")); err != nil {
		t.Fatalf("a key another writer removed: %v", err)
	}
	out = export(t, g, "")
	if !strings.Contains(out, "A again") || !strings.Contains(out, `"handle":"z"`) || strings.Contains(out, `"handle":"b"`) {
		t.Fatalf("after the overwrite:\n%s", out)
	}
}

// A load arms its sidecar beside its revalidation. When the revalidation finds that another
// writer moved a table, the sidecar is taken back before the load prepares again: the load
// lands, and no sidecar is left behind. Should taking it back fail, the load reports
// RecoveryRequired, and recovery discards the intent (it moved nothing).
func TestSpeculativeArmTakenBackWhenTheRevalidationFails(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", person("a", "A"))
	other, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	loadInto(t, other, "", "", "append", person("b", "B"))
	loadInto(t, g, "", "", "append", person("c", "C")) // g's view lacks b: prepared again
	noSidecars(t, g)

	loadInto(t, other, "", "", "append", person("d", "D"))
	if err := failpoint.Enable(recovery.FailpointDelete, "1*error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	_, err = load(t, g, "append", person("e", "E"))
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("a sidecar that could not be taken back: %v, want RecoveryRequired", err)
	}
	if out, err := g.Recover(ctx); err != nil || len(out) != 1 || out[0].OperationID != rr.OperationID {
		t.Fatalf("recovery of the intent not taken back: %+v %v", out, err)
	}
	noSidecars(t, g)
	loadInto(t, g, "", "", "append", person("e", "E"))
	out := export(t, g, "")
	for _, h := range []string{"a", "b", "c", "d", "e"} {
		if strings.Count(out, fmt.Sprintf(`"handle":%q`, h)) != 1 {
			t.Fatalf("%s not there once:\n%s", h, out)
		}
	}
}

// compactionRoundTrips is the most sequential round trips a staged compaction's commit waits
// for: the sidecar beside the revalidation (the heal's listing, the schema, __manifest and
// each staged table's HEAD); the table commits, side by side, beside the publish's data files;
// the publish's commit (the publish starts from the snapshot the revalidation read; the
// sidecar's removal runs in the background). One after the other they were 10, then 6 with the
// heal and the snapshot before the arm, 4 with the publish's files after the tables
// (docs/object-store-latency.md).
const compactionRoundTrips = 3

// A staged compaction's commit, a rewrite and then an index build, waits for at most
// compactionRoundTrips sequential round trips however many tables it rewrites. The publish's
// data file is built in memory while the table commits are in flight: at a 5 ms delay its put
// started after they ended on a loaded race-detector run (CI counted 4; see roundTripDelay).
func TestCompactionRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g, l := latencyGraph(t, "compaction-round-trips", roundTripDelay)
	g.RetireInBackground()
	defer noSidecars(t, g)
	defer g.WaitRetired()
	for i := range 17 {
		if _, err := g.Load(ctx, LoadRequest{Mode: ModeAppend, Records: benchdata.GraphBatch(i, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, indices := range []bool{false, true} {
		sc, err := g.StageCompaction(ctx, OptimizeOptions{Indices: indices})
		if err != nil || sc == nil {
			t.Fatalf("indices %v: nothing staged (%v)", indices, err)
		}
		var trace []string
		l.Trace(func(r storage.Request) { trace = append(trace, fmt.Sprintf("%d %s %s", r.Depth, r.Op, r.Location)) })
		rt0 := l.RoundTrips()
		res, err := g.CommitCompaction(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		l.Trace(nil)
		if len(res.Tables) != 2 {
			t.Fatalf("indices %v: %d tables compacted, want both", indices, len(res.Tables))
		}
		if rt := l.RoundTrips() - rt0; rt > compactionRoundTrips {
			t.Fatalf("indices %v: the commit waited for %d sequential round trips, want at most %d:\n%s", indices, rt, compactionRoundTrips, strings.Join(trace, "\n"))
		}
	}
}
