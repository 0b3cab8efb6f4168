package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// stageDue stages the compaction o finds due, which the test requires there to be.
func stageDue(t *testing.T, g *Graph, o OptimizeOptions) *StagedCompaction {
	t.Helper()
	sc, err := g.StageCompaction(context.Background(), o)
	if err != nil || sc == nil {
		t.Fatalf("stage: %v %v", sc, err)
	}
	return sc
}

// A compaction staged while loads go on commits after them: the rows it rewrote and the ones
// appended meanwhile are all there once, the writer's indexes follow the moved rows, and the
// run it staged is gone from every table.
func TestStagedCompactionCommitsAfterLoads(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	smallLoads(t, g, "", "p", 16)
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16, Actor: "bg"})
	smallLoads(t, g, "", "q", 3)
	before := sortedExport(t, g, "")
	res, err := g.CommitCompaction(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || len(res.Tables) != 3 || len(res.Stale) != 0 {
		t.Fatalf("result %+v", res)
	}
	for _, tc := range res.Tables {
		if tc.FragmentsBefore != 19 || tc.FragmentsRemoved != 16 || tc.FragmentsAdded != 1 || tc.RowsRewritten != 16 {
			t.Fatalf("table %+v", tc)
		}
	}
	for key, n := range mainFragments(t, g) {
		if n != 4 {
			t.Fatalf("%s: %d fragments, want the rewritten one and the three appended after it", key, n)
		}
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatalf("the compaction changed the graph:\n%s\n---\n%s", before, after)
	}
	assertIndexesMatchStorage(t, g)
	noSidecars(t, g)
	loadInto(t, g, "", "", "merge", person("p3", "P three"), person("q1", "Q one"))
	if _, err := load(t, g, "append", person("p7", "again")); errs.Kind(err) != errs.KindKeyConflict {
		t.Fatalf("strict insert of a compacted id: %v", err)
	}
	out := export(t, g, "")
	if strings.Count(out, `"handle":"p3"`) != 1 || !strings.Contains(out, "P three") || !strings.Contains(out, "Q one") {
		t.Fatalf("upserts after the compaction:\n%s", out)
	}
	assertIndexesMatchStorage(t, g)
	tablesAligned(t, g)
}

// An upsert that replaced a row of a staged run makes that table's rewrite stale: it is left
// out (the others commit), the row keeps its new value, and the next compaction takes it up.
func TestStagedCompactionLeavesChangedTablesOut(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	smallLoads(t, g, "", "p", 16)
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16})
	loadInto(t, g, "", "", "merge", person("p5", "P five"))
	res, err := g.CommitCompaction(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || len(res.Tables) != 2 || len(res.Stale) != 1 || res.Stale[0] != "node:Person" {
		t.Fatalf("result %+v", res)
	}
	out := export(t, g, "")
	if strings.Count(out, `"handle":"p5"`) != 1 || !strings.Contains(out, "P five") {
		t.Fatalf("the upserted row after a stale compaction:\n%s", out)
	}
	assertIndexesMatchStorage(t, g)
	if !g.CompactionDue(16) {
		t.Fatal("the stale table's run is no longer due")
	}
	if res := optimize(t, g, OptimizeOptions{Fanout: 16}); res.Commit == nil || len(res.Tables) != 1 || res.Tables[0].TableKey != "node:Person" {
		t.Fatalf("the next compaction: %+v", res)
	}
	if out2 := export(t, g, ""); !strings.Contains(out2, "P five") || strings.Count(out2, `"handle":"p5"`) != 1 {
		t.Fatalf("after compacting the stale table:\n%s", out2)
	}
}

// Nothing due stages nothing; a staging that fails and a commit that fails before arming
// leave the graph as it was and its next compaction working.
func TestStagedCompactionNothingDueAndFailures(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	g := testGraph(t)
	ctx := context.Background()
	smallLoads(t, g, "", "p", 3)
	if sc, err := g.StageCompaction(ctx, OptimizeOptions{Fanout: 16}); sc != nil || err != nil {
		t.Fatalf("nothing due: %v %v", sc, err)
	}
	smallLoads(t, g, "", "q", 13)
	before := sortedExport(t, g, "")
	for _, point := range []string{"compaction.after_stage", "optimize.after_prepare"} {
		if err := failpoint.Enable(point, "error"); err != nil {
			t.Fatal(err)
		}
		sc, err := g.StageCompaction(ctx, OptimizeOptions{Fanout: 16})
		if err == nil {
			_, err = g.CommitCompaction(ctx, sc)
		}
		if err == nil {
			t.Fatalf("%s: no error", point)
		}
		failpoint.Reset()
		if after := sortedExport(t, g, ""); after != before {
			t.Fatalf("%s changed the graph", point)
		}
		noSidecars(t, g)
	}
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16})
	if res, err := g.CommitCompaction(ctx, sc); err != nil || res.Commit == nil {
		t.Fatalf("commit after the failures: %+v %v", res, err)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatal("the compaction changed the graph")
	}
}

// CompactionBytes is nothing when no run is due, and twice the due runs' files (each capped at
// one output file) when some are, summed over the stageConcurrency largest (staged together):
// what a worker counts while the compaction holds its rows and file.
func TestCompactionBytes(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 15)
	if n := g.CompactionBytes(OptimizeOptions{Fanout: 16}); n != 0 {
		t.Fatalf("%d bytes with nothing due", n)
	}
	smallLoads(t, g, "", "q", 1)
	runs := map[string]uint64{} // each table's run: all its files
	var largest uint64
	for ref, ts := range g.tables {
		if ref.branch != "" {
			continue
		}
		for _, f := range ts.ds.Manifest().Fragments {
			n, _ := f.FileBytes()
			runs[ref.path] += n
			largest = max(largest, n)
		}
	}
	if len(runs) < stageConcurrency {
		t.Fatalf("%d tables due, want at least %d", len(runs), stageConcurrency)
	}
	// peak is what the runs of the tables keep holds: the stageConcurrency largest, twice.
	peak := func(keep func(path string) bool) uint64 {
		var rs []uint64
		for path, r := range runs {
			if keep(path) {
				rs = append(rs, r)
			}
		}
		slices.SortFunc(rs, func(a, b uint64) int { return cmp.Compare(b, a) })
		var sum uint64
		for _, r := range rs[:min(len(rs), stageConcurrency)] {
			sum += 2 * r
		}
		return sum
	}
	want := peak(func(string) bool { return true })
	if n := g.CompactionBytes(OptimizeOptions{Fanout: 16}); n <= 0 || uint64(n) != want {
		t.Fatalf("%d bytes due, want %d", n, want)
	}
	// With indices kept, a table whose index work is due does it first and leaves its run for
	// a later pass: its run is not counted, until its index work has failed (its run then goes
	// first again).
	indexFirst := map[string]bool{}
	for ref, ts := range g.tables {
		if ref.branch == "" && g.indexWorkDue(ref.path, ts.ds, 16) {
			indexFirst[ref.path] = true
		}
	}
	if len(indexFirst) == 0 { // no index built yet: due on every table with a wanted one
		t.Fatalf("index work due on none of %d tables", len(runs))
	}
	withIndices := OptimizeOptions{Fanout: 16, Indices: true}
	if n, w := g.CompactionBytes(withIndices), peak(func(p string) bool { return !indexFirst[p] }); uint64(n) != w {
		t.Fatalf("%d bytes due with index work first on %d tables, want %d", n, len(indexFirst), w)
	}
	for path := range indexFirst {
		g.indexWorkFailed.Store(path, true)
	}
	if n := g.CompactionBytes(withIndices); uint64(n) != want {
		t.Fatalf("%d bytes due after the index work failed, want %d", n, want)
	}
	for path := range indexFirst {
		g.indexWorkFailed.Delete(path)
	}
	// Output files of a few fragments' size: the runs are still due, their files cut at that.
	cut := 4 * largest
	if n := g.CompactionBytes(OptimizeOptions{Fanout: 16, MaxBytesPerFile: cut}); uint64(n) != stageConcurrency*2*cut {
		t.Fatalf("%d bytes with %d-byte files, want %d", n, cut, stageConcurrency*2*cut)
	}
}

// A staged compaction older than half the orphan grace is not published: a cleanup may by then
// take its files for leftovers. Every table is stale and nothing commits.
func TestStagedCompactionExpires(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	smallLoads(t, g, "", "p", 16)
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16})
	sc.at = sc.at.Add(-stagedCompactionMaxAge - time.Second)
	before := mainFragments(t, g)
	res, err := g.CommitCompaction(ctx, sc)
	if err != nil || res.Commit != nil || len(res.Stale) != 3 {
		t.Fatalf("an expired compaction: %+v %v", res, err)
	}
	if after := mainFragments(t, g); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("fragments %v, were %v", after, before)
	}
}

// tracedGraph is a new example-schema graph on a mem:// root whose requests the returned
// latency counts and traces (no delay).
func tracedGraph(t *testing.T, name string) (*Graph, *storage.Latency) {
	t.Helper()
	ctx := context.Background()
	l := storage.NewLatency(0)
	root, err := storage.Open(ctx, fmt.Sprintf("mem://%s-%d", name, latencySeq.Add(1)), storage.WithLatency(l))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Init(ctx, root, graphtest.Schema(t, graphtest.Example))
	if err != nil {
		t.Fatal(err)
	}
	return g, l
}

// recoveryWrites counts the requests that write (put, replace) or delete under __recovery on a
// traced root.
func recoveryWrites(l *storage.Latency) (puts, deletes *atomic.Int64) {
	puts, deletes = new(atomic.Int64), new(atomic.Int64)
	l.Trace(func(r storage.Request) {
		switch {
		case !strings.Contains(r.Location, "__recovery"):
		case strings.HasPrefix(r.Op, "put"), r.Op == "replace":
			puts.Add(1)
		case strings.HasPrefix(r.Op, "delete"):
			deletes.Add(1)
		}
	})
	return puts, deletes
}

// A staged compaction is moved onto the state its writer holds and revalidated beside its
// arm. When another process published meanwhile, the revalidation fails: the sidecar armed
// beside it is taken back, and the commit moves the rewrites onto what storage holds, arms
// again and commits over the other process's rows. Should the take-back fail, the commit
// reports RecoveryRequired and recovery discards the intent.
func TestStagedCompactionOnAMovedGraphArmsAgain(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	ctx := context.Background()
	g, l := tracedGraph(t, "compaction-moved")
	other, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	smallLoads(t, g, "", "p", 16)
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16})
	smallLoads(t, other, "", "q", 1)
	puts, deletes := recoveryWrites(l)
	res, err := g.CommitCompaction(ctx, sc)
	l.Trace(nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit == nil || len(res.Tables) != 3 || len(res.Stale) != 0 {
		t.Fatalf("result %+v", res)
	}
	if puts.Load() != 2 || deletes.Load() != 2 {
		t.Fatalf("%d sidecar puts and %d deletes, want the speculative one taken back and the second retired", puts.Load(), deletes.Load())
	}
	for key, n := range mainFragments(t, g) {
		if n != 2 {
			t.Fatalf("%s: %d fragments, want the rewritten one and the other process's", key, n)
		}
	}
	out := export(t, g, "")
	for _, h := range []string{"p0", "p15", "q0"} {
		if strings.Count(out, fmt.Sprintf(`"handle":%q`, h)) != 1 {
			t.Fatalf("%s not there once:\n%s", h, out)
		}
	}
	assertIndexesMatchStorage(t, g)
	noSidecars(t, g)

	smallLoads(t, g, "", "r", 16)
	sc = stageDue(t, g, OptimizeOptions{Fanout: 16})
	smallLoads(t, other, "", "s", 1)
	if err := failpoint.Enable(recovery.FailpointDelete, "1*error"); err != nil {
		t.Fatal(err)
	}
	_, err = g.CommitCompaction(ctx, sc)
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("a sidecar that could not be taken back: %v, want RecoveryRequired", err)
	}
	failpoint.Reset()
	if out, err := g.Recover(ctx); err != nil || len(out) != 1 || out[0].OperationID != rr.OperationID {
		t.Fatalf("recovery of the intent not taken back: %+v %v", out, err)
	}
	noSidecars(t, g)
	out = export(t, g, "")
	for _, h := range []string{"p0", "q0", "r0", "r15", "s0"} {
		if strings.Count(out, fmt.Sprintf(`"handle":%q`, h)) != 1 {
			t.Fatalf("%s not there once after the recovery:\n%s", h, out)
		}
	}
	smallLoads(t, g, "", "t", 1) // a write opens again the tables recovery made it forget
	sc = stageDue(t, g, OptimizeOptions{Fanout: 16})
	if res, err := g.CommitCompaction(ctx, sc); err != nil || res.Commit == nil {
		t.Fatalf("the compaction after recovery: %+v %v", res, err)
	}
	assertIndexesMatchStorage(t, g)
}

// A staged compaction refused for drift marks its writer as a load does: tried again, it
// revalidates before it arms and writes no sidecar.
func TestDriftedCompactionTriedAgainWritesNoSidecar(t *testing.T) {
	ctx := context.Background()
	g, l := tracedGraph(t, "compaction-drift")
	smallLoads(t, g, "", "p", 16)
	sc := stageDue(t, g, OptimizeOptions{Fanout: 16})
	foreignAppendOn(t, g, "node:Person", "")
	puts, _ := recoveryWrites(l)
	_, err := g.CommitCompaction(ctx, sc)
	wantDrift(t, err, "node:Person")
	if puts.Load() != 1 {
		t.Fatalf("the first drifted commit wrote %d sidecars beside its revalidation, want 1: the test sees nothing", puts.Load())
	}
	for range 3 {
		_, err = g.CommitCompaction(ctx, sc)
		wantDrift(t, err, "node:Person")
	}
	l.Trace(nil)
	if puts.Load() != 1 {
		t.Fatalf("three commits tried again on the drift wrote %d more sidecars, want none", puts.Load()-1)
	}
	noSidecars(t, g)
	if _, err := g.RestoreDrift(ctx); err != nil {
		t.Fatal(err)
	}
	smallLoads(t, g, "", "q", 1) // a write opens again the tables the restore made it forget
	if res, err := g.CommitCompaction(ctx, stageDue(t, g, OptimizeOptions{Fanout: 16})); err != nil || res.Commit == nil {
		t.Fatalf("after the restore: %+v %v", res, err)
	}
	if g.drifted.Load() {
		t.Fatal("a committed compaction left the drift mark")
	}
}
