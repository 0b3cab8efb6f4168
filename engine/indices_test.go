package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// publishedBTrees lists, per main table at its published version, the columns with a BTREE.
func publishedBTrees(t *testing.T, g *Graph) map[string][]string {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, e := range st.Tables() {
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.AtVersion(e.Version))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"id", "src", "dst"} {
			if ds.HasBTree(c) {
				out[e.TableKey] = append(out[e.TableKey], c)
			}
		}
	}
	return out
}

const referenceBTrees = "map[edge:WorksAt:[id src dst] node:Company:[id] node:Person:[id]]"

// Optimize with Indices builds the indices the reference keeps on every table with rows,
// one CreateIndex per table in one graph commit; the graph reads the same, and later loads
// keep the indices.
func TestOptimizeBuildsTheReferenceIndices(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 3)
	before := sortedExport(t, g, "")
	if res := optimize(t, g, OptimizeOptions{}); res.Commit != nil {
		t.Fatalf("an optimize without Indices built some: %+v", res)
	}
	if !g.IndicesDue(0) {
		t.Fatal("no index due on tables with rows and none")
	}
	res := optimize(t, g, OptimizeOptions{Indices: true, Actor: "ops"})
	if res.Commit == nil || len(res.Tables) != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, tc := range res.Tables {
		if len(tc.IndicesBuilt) == 0 || tc.ToVersion != tc.FromVersion+1 || tc.FragmentsRemoved != 0 {
			t.Fatalf("table %+v", tc)
		}
	}
	if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
		t.Fatalf("indices %s, want %s", got, referenceBTrees)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatalf("the index build changed the graph:\n%s\n---\n%s", before, after)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	if g.IndicesDue(0) {
		t.Fatal("still due after the build")
	}
	if res := optimize(t, g, OptimizeOptions{Indices: true}); res.Commit != nil {
		t.Fatalf("a second build had work: %+v", res)
	}
	loadInto(t, g, "", "", "merge", person("p1", "P one"))
	smallLoads(t, g, "", "q", 2)
	if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
		t.Fatalf("after loads: indices %s", got)
	}
	assertIndexesMatchStorage(t, g)
}

// A crash at any step of an index build leaves the old index set or the new one published,
// never a half: recovery publishes a CreateIndex that landed at the pin + 1.
func TestIndexBuildFailuresRecover(t *testing.T) {
	for _, c := range []struct {
		fp    string
		after string // the published indices after the heal
	}{
		{"optimize.after_sidecar", "map[]"},
		{"lance.write_index_file", "map[]"}, // before any table commit: nothing to recover
		// The tables commit side by side: every build has landed when the first failure is
		// seen, and recovery keeps them all.
		{"optimize.after_table_commit", referenceBTrees},
		{"optimize.before_publish", referenceBTrees},
		{"optimize.after_publish", referenceBTrees},
	} {
		t.Run(c.fp, func(t *testing.T) {
			g := testGraph(t)
			t.Cleanup(failpoint.Reset)
			smallLoads(t, g, "", "p", 2)
			before := sortedExport(t, g, "")
			if err := failpoint.Enable(c.fp, "1*error"); err != nil {
				t.Fatal(err)
			}
			_, err := g.Optimize(context.Background(), OptimizeOptions{Indices: true})
			var rr *errs.RecoveryRequired
			if err == nil || (!errors.As(err, &rr) && c.fp != "lance.write_index_file") {
				t.Fatalf("want RecoveryRequired, got %v", err)
			}
			failpoint.Reset()
			loadInto(t, g, "", "", "append", person("late", "Late")) // heals first
			noSidecars(t, g)
			tablesAligned(t, g)
			if got := fmt.Sprint(publishedBTrees(t, g)); got != c.after {
				t.Fatalf("indices after the heal %s, want %s", got, c.after)
			}
			// Whatever landed, the next build completes the set.
			optimize(t, g, OptimizeOptions{Indices: true})
			if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
				t.Fatalf("indices after a second build %s", got)
			}
			var kept []string
			for _, l := range strings.Split(sortedExport(t, g, ""), "\n") {
				if !strings.Contains(l, `"handle":"late"`) {
					kept = append(kept, l)
				}
			}
			if strings.Join(kept, "\n") != before {
				t.Fatalf("graph changed:\n%s\n---\n%s", before, strings.Join(kept, "\n"))
			}
			assertIndexesMatchStorage(t, g)
		})
	}
}

// The automatic maintenance builds indices off the writer's turn and moves the staged build
// past the loads that committed meanwhile; a build whose covered fragment went is dropped as
// stale and staged again.
func TestStagedIndexBuildRebasesOverLoads(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 2)
	ctx := context.Background()
	sc, err := g.StageCompaction(ctx, OptimizeOptions{Indices: true})
	if err != nil || sc == nil {
		t.Fatalf("stage: %v %v", sc, err)
	}
	// The index files are written by the staging, off the writer's turn: the commit in it
	// only names them.
	for _, tb := range sc.tables {
		ds := g.tables[tableRef{path: tb.path}].ds
		for _, x := range tb.staged.Txn.Op.NewIndices {
			objs, err := ds.Store().List(ctx, x.Dir())
			if err != nil || len(objs) == 0 {
				t.Fatalf("%s: index %s staged, %d files written (%v)", tb.path, x.Name, len(objs), err)
			}
		}
	}
	smallLoads(t, g, "", "q", 2) // appends: the build still holds
	res, err := g.CommitCompaction(ctx, sc)
	if err != nil || res.Commit == nil || len(res.Stale) != 0 {
		t.Fatalf("commit over appends: %+v %v", res, err)
	}
	if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
		t.Fatalf("indices %s", got)
	}
	tablesAligned(t, g)
}

// The automatic maintenance stages a table's missing indices before its due run
// (indexWorkFirst), and the run at the next pass: behind the runs a busy stream keeps due, the
// build would wait for a lull.
func TestStagedMaintenanceBuildsIndicesBeforeTheRun(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 2)
	if !g.CompactionDue(2) || !g.IndicesDue(2) {
		t.Fatal("want a run and index work due together")
	}
	o := OptimizeOptions{Indices: true, Fanout: 2}
	sc := stageDue(t, g, o)
	for _, tb := range sc.tables {
		if tb.c != nil || len(tb.indices) == 0 {
			t.Fatalf("%s: staged a rewrite before its indices", tb.path)
		}
	}
	commitStaged(t, g, sc, "the builds")
	sc = stageDue(t, g, o)
	for _, tb := range sc.tables {
		if tb.c == nil {
			t.Fatalf("%s: the run did not follow the build", tb.path)
		}
	}
	commitStaged(t, g, sc, "the rewrite")
	assertReferenceIndices(t, g)
}

// commitStaged commits sc, which the test requires to make a graph commit.
func commitStaged(t *testing.T, g *Graph, sc *StagedCompaction, what string) {
	t.Helper()
	if res, err := g.CommitCompaction(context.Background(), sc); err != nil || res.Commit == nil {
		t.Fatalf("commit %s: %+v %v", what, res, err)
	}
}

// assertReferenceIndices requires the reference's BTREEs published, every index matching the
// storage, and the tables aligned with __manifest.
func assertReferenceIndices(t *testing.T, g *Graph) {
	t.Helper()
	if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
		t.Fatalf("indices %s", got)
	}
	assertIndexesMatchStorage(t, g)
	tablesAligned(t, g)
}

// An index staging that keeps failing does not stop compaction: after a failed one the
// table's due run goes first again, and its index work is tried when no run is due.
func TestFailingIndexWorkLetsTheRunGoFirst(t *testing.T) {
	g, o := failingIndexWrites(t)
	ctx := context.Background()
	if sc, err := g.StageCompaction(ctx, o); err == nil {
		t.Fatalf("index staging under a failing write: %+v", sc)
	}
	sc := stageDue(t, g, o)
	for _, tb := range sc.tables {
		if tb.c == nil {
			t.Fatalf("%s: index work first again after it failed", tb.path)
		}
	}
	commitStaged(t, g, sc, "the rewrite")
	if g.CompactionDue(2) {
		t.Fatal("a run still due after the rewrite")
	}
	if _, err := g.StageCompaction(ctx, o); err == nil {
		t.Fatal("index work not tried once no run was due")
	}
	failpoint.Reset()
	smallLoads(t, g, "", "q", 2)
	if res := optimize(t, g, o); len(res.Tables) == 0 || res.Tables[0].FragmentsRemoved == 0 {
		t.Fatalf("the run did not go first after the failure: %+v", res)
	}
	indexedAfterAll(t, g, o)
}

// Optimize, the inline path, writes an index build's files in its commit; a table whose index
// files could not be written there gets its due run first in the next pass too, so an index
// that keeps failing cannot stop the compaction the worker runs in its turn.
func TestFailingIndexWriteInlineLetsTheRunGoFirst(t *testing.T) {
	g, o := failingIndexWrites(t)
	if res, err := g.Optimize(context.Background(), o); err == nil {
		t.Fatalf("index build under a failing write: %+v", res)
	}
	res := optimize(t, g, o) // the index write still fails: only the runs can succeed
	if len(res.Tables) == 0 {
		t.Fatal("nothing compacted after the failed index write")
	}
	for _, tc := range res.Tables {
		if tc.FragmentsRemoved == 0 || len(tc.IndicesBuilt) != 0 {
			t.Fatalf("%s: the run did not go first after the failed index write: %+v", tc.TableKey, tc)
		}
	}
	failpoint.Reset()
	indexedAfterAll(t, g, o)
}

// failingIndexWrites is a graph of two small loads (a run due at fanout 2, and the indices)
// whose index files cannot be written, and the maintenance pass o that meets both.
func failingIndexWrites(t *testing.T) (*Graph, OptimizeOptions) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	smallLoads(t, g, "", "p", 2)
	if err := failpoint.Enable("lance.write_index_file", "error"); err != nil {
		t.Fatal(err)
	}
	return g, OptimizeOptions{Indices: true, Fanout: 2}
}

// indexedAfterAll runs maintenance passes o (at most three) until no index work is due, and
// checks that g then has the reference's indices.
func indexedAfterAll(t *testing.T, g *Graph, o OptimizeOptions) {
	t.Helper()
	for i := 0; i < 3 && g.IndicesDue(o.Fanout); i++ {
		optimize(t, g, o)
	}
	assertReferenceIndices(t, g)
}

// An index whose unindexed rows exceed those it covers (indexLagShare) is folded
// (brought up to date over the whole table), so the rows a query scans beside it stay
// bounded; the metric reports the lag. Fragments alone do not make it due: compaction merges
// them.
func TestIndicesAreFoldedOnceTheLagExceedsItsShare(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 8)
	optimize(t, g, OptimizeOptions{Indices: true})
	smallLoads(t, g, "", "q", 1)
	if g.IndicesDue(4) {
		t.Fatal("1 unindexed row beside 8 indexed is due")
	}
	if got := g.UnindexedRows()["node:Person"]; got != 1 {
		t.Fatalf("unindexed rows of node:Person %d, want 1", got)
	}
	smallLoads(t, g, "", "r", 7)
	if g.IndicesDue(4) {
		t.Fatal("8 unindexed rows beside 8 indexed are due: the lag must exceed the rows covered")
	}
	smallLoads(t, g, "", "s", 1)
	if !g.IndicesDue(4) {
		t.Fatal("9 unindexed rows beside 8 indexed are not due")
	}
	// A table whose tier is due is folded first (one transaction per table and commit:
	// indexWorkFirst), and compacted by the next pass.
	if !g.CompactionDue(4) {
		t.Fatal("no run due beside the fold")
	}
	res := optimize(t, g, OptimizeOptions{Indices: true, Fanout: 4})
	for _, tc := range res.Tables {
		if tc.FragmentsRemoved != 0 || len(tc.IndicesBuilt) == 0 {
			t.Fatalf("the first pass compacted %s before folding its indices: %+v", tc.TableKey, tc)
		}
	}
	if got := g.UnindexedRows()["node:Person"]; got != 0 {
		t.Fatalf("node:Person: %d rows unindexed after the fold", got)
	}
	if !g.CompactionDue(4) {
		t.Fatal("the fold took the run due with it")
	}
	for i := 0; i < 3 && res.Commit != nil; i++ {
		res = optimize(t, g, OptimizeOptions{Indices: true, Fanout: 4})
	}
	if res.Commit != nil {
		t.Fatalf("maintenance still has work after four passes: %+v", res)
	}
	for k, n := range g.UnindexedRows() {
		if n != 0 {
			t.Fatalf("%s: %d rows unindexed after the fold", k, n)
		}
	}
	if got := fmt.Sprint(publishedBTrees(t, g)); got != referenceBTrees {
		t.Fatalf("indices %s", got)
	}
	assertIndexesMatchStorage(t, g)
}

// publishedIndex finds spec on a main table at its published version.
func publishedIndex(t *testing.T, g *Graph, key string, s lance.IndexSpec) *lance.Index {
	t.Helper()
	return tableDataset(t, g, key).Find(s)
}

func doc(i int, embedding string) string {
	return fmt.Sprintf(`{"type":"Doc","data":{"url":"https://d/%d","title":"Running documents number %d","body":"b","embedding":%s}}`, i, i, embedding)
}

// The reference's full set: INVERTED on a free-text @index String (Person.name, inherited;
// Doc.title), IVF_FLAT on an @index Vector (Doc.embedding) once it has a vector to index,
// BTREE on id; nothing on a list, and edges only id/src/dst.
func TestOptimizeBuildsInvertedAndVectorIndices(t *testing.T) {
	g := testGraph(t)
	ctx := context.Background()
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "", "", "append", doc(1, "null"), doc(2, "null"))
	res := optimize(t, g, OptimizeOptions{Indices: true})
	if res.Commit == nil {
		t.Fatal("nothing built")
	}
	name := lance.IndexSpec{Column: "name", Kind: lance.IndexInverted}
	title := lance.IndexSpec{Column: "title", Kind: lance.IndexInverted}
	vec := lance.IndexSpec{Column: "embedding", Kind: lance.IndexIVFFlat}
	for _, c := range []struct {
		key  string
		spec lance.IndexSpec
		want bool
	}{
		{"node:Person", name, true}, {"node:Person", lance.IndexSpec{Column: "id", Kind: lance.IndexBTree}, true},
		{"node:Doc", title, true}, {"node:Doc", lance.IndexSpec{Column: "id", Kind: lance.IndexBTree}, true},
		{"node:Doc", vec, false}, // no vector yet: pending, as the reference
		{"node:Person", lance.IndexSpec{Column: "skills", Kind: lance.IndexInverted}, false},
	} {
		if got := publishedIndex(t, g, c.key, c.spec) != nil; got != c.want {
			t.Errorf("%s %s: built %v, want %v", c.key, c.spec, got, c.want)
		}
	}
	if g.IndicesDue(0) {
		t.Fatal("a pending vector index keeps maintenance due on a table that has not grown")
	}
	// Vectors arrive, and the table doubles: the vector index is built.
	loadInto(t, g, "", "", "append", doc(3, "[1,0,0,0,0,0,0,0]"), doc(4, "[0,1,0,0,0,0,0,0]"), doc(5, "[0,0,1,0,0,0,0,0]"))
	if !g.IndicesDue(0) {
		t.Fatal("the vector index is not due once the table doubled")
	}
	res = optimize(t, g, OptimizeOptions{Indices: true})
	if res.Commit == nil || publishedIndex(t, g, "node:Doc", vec) == nil {
		t.Fatalf("the vector index was not built: %+v", res)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
}

// A table whose every wanted index but the ones it has cannot be built yet stages nothing and
// fails nothing: the pending ones wait.
func TestIndexBuildWithOnlyPendingIndices(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", doc(1, "null"))
	optimize(t, g, OptimizeOptions{Indices: true}) // id, url, title built; embedding pending
	g2, err := Open(context.Background(), g.root)  // a new process: nothing remembered
	if err != nil {
		t.Fatal(err)
	}
	if res := optimize(t, g2, OptimizeOptions{Indices: true}); res.Commit != nil {
		t.Fatalf("built something: %+v", res)
	}
}
