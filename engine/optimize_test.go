package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// smallLoads appends n batches of one person, one company and the edge between them: n
// one-row fragments in each of three tables, the shape a stream of small messages leaves.
func smallLoads(t *testing.T, g *Graph, branch, prefix string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		loadInto(t, g, branch, "", "append",
			person(fmt.Sprintf("%s%d", prefix, i), fmt.Sprintf("P %d", i)),
			fmt.Sprintf(`{"type":"Company","data":{"domain":"%s%d.io","name":"C","size":"smb"}}`, prefix, i),
			fmt.Sprintf(`{"edge":"WorksAt","from":"%s%d","to":"%s%d.io","data":{"id":"w-%s%d"}}`, prefix, i, prefix, i, prefix, i))
	}
}

// mainFragments counts the fragments of each main table at its published version.
func mainFragments(t *testing.T, g *Graph) map[string]int {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range st.Tables() {
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.AtVersion(e.Version))
		if err != nil {
			t.Fatal(err)
		}
		if n := ds.NumFragments(); n > 0 {
			out[e.TableKey] = n
		}
	}
	return out
}

func optimize(t *testing.T, g *Graph, o OptimizeOptions) *OptimizeResult {
	t.Helper()
	res, err := g.Optimize(context.Background(), o)
	if err != nil {
		t.Fatalf("optimize: %v", err)
	}
	return res
}

// A full run of one size tier is merged into one fragment in one graph commit; the graph reads
// the same, the writer's id indexes follow the rows to their new addresses, and upserts and
// strict inserts against the moved rows behave as before.
func TestOptimizeMergesFullTierRuns(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 20)
	before := sortedExport(t, g, "")
	if !g.CompactionDue(16) || g.CompactionDue(32) {
		t.Fatalf("due at 16: %v, at 32: %v (20 one-row fragments per table)", g.CompactionDue(16), g.CompactionDue(32))
	}
	res := optimize(t, g, OptimizeOptions{Fanout: 16, Actor: "ops"})
	if res.Commit == nil || len(res.Tables) != 3 {
		t.Fatalf("result %+v", res)
	}
	for _, tc := range res.Tables {
		if tc.FragmentsBefore != 20 || tc.FragmentsRemoved != 20 || tc.FragmentsAdded != 1 || tc.RowsRewritten != 20 || tc.ToVersion != tc.FromVersion+1 {
			t.Fatalf("table %+v", tc)
		}
	}
	if res.Commit.ActorID == nil || *res.Commit.ActorID != "ops" {
		t.Fatalf("commit %+v", res.Commit)
	}
	for key, n := range mainFragments(t, g) {
		if n != 1 {
			t.Fatalf("%s: %d fragments after compaction", key, n)
		}
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatalf("compaction changed the graph:\n%s\n---\n%s", before, after)
	}
	assertIndexesMatchStorage(t, g)
	noSidecars(t, g)
	if g.CompactionDue(16) {
		t.Fatal("still due after compaction")
	}
	if res := optimize(t, g, OptimizeOptions{Fanout: 16}); res.Commit != nil || len(res.Tables) != 0 {
		t.Fatalf("a second optimize had work: %+v", res)
	}
	// The moved rows are found where they now live.
	loadInto(t, g, "", "", "merge", person("p3", "P three"))
	if _, err := load(t, g, "append", person("p7", "again")); errs.Kind(err) != errs.KindKeyConflict {
		t.Fatalf("strict insert of a compacted id: %v", err)
	}
	out := export(t, g, "")
	if strings.Count(out, `"handle":"p3"`) != 1 || !strings.Contains(out, "P three") {
		t.Fatalf("upsert of a compacted row:\n%s", out)
	}
	assertIndexesMatchStorage(t, g)
	tablesAligned(t, g)
}

// Optimize with All rewrites every small fragment and materializes deletions.
func TestOptimizeAllMaterializesDeletions(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 5)
	loadInto(t, g, "", "", "merge", person("p1", "P one"), person("p2", "P two")) // deletes in p1's and p2's fragments
	before := sortedExport(t, g, "")
	if res := optimize(t, g, OptimizeOptions{Fanout: 16}); res.Commit != nil {
		t.Fatalf("five fragments are no full run of 16: %+v", res)
	}
	res := optimize(t, g, OptimizeOptions{All: true})
	if res.Commit == nil || len(res.Tables) != 3 {
		t.Fatalf("result %+v", res)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatalf("compaction changed the graph:\n%s\n---\n%s", before, after)
	}
	ctx := context.Background()
	st, _ := g.Snapshot(ctx, "")
	e, _ := st.Table("node:Person")
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.AtVersion(e.Version))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ds.Manifest().Fragments {
		if f.Deletion != nil {
			t.Fatalf("fragment %d keeps a deletion file after a full compaction", f.ID)
		}
	}
	if ds.NumFragments() != 1 || ds.CountRows() != 5 {
		t.Fatalf("Person: %d fragments, %d rows", ds.NumFragments(), ds.CountRows())
	}
	assertIndexesMatchStorage(t, g)
}

// Every failure after the sidecar is armed is RecoveryRequired; the next write's heal keeps
// whatever rewrite committed (publishing its pointer) and drops the rest, and the graph reads
// the same throughout.
func TestOptimizeFailuresRecover(t *testing.T) {
	for _, c := range []struct {
		fp        string
		published bool // the compaction is visible after the heal
		audited   bool // recovery published it and left an audit row
	}{
		{"optimize.after_sidecar", false, true},     // recovery takes the planned versions and publishes the takes
		{"optimize.after_table_commit", true, true}, // the tables committed side by side, the failure seen after
		{"optimize.before_publish", true, true},
		{"optimize.after_publish", true, false},
	} {
		t.Run(c.fp, func(t *testing.T) {
			g := testGraph(t)
			t.Cleanup(failpoint.Reset)
			smallLoads(t, g, "", "p", 3)
			before := sortedExport(t, g, "")
			frags := mainFragments(t, g)
			if err := failpoint.Enable(c.fp, "1*error"); err != nil {
				t.Fatal(err)
			}
			_, err := g.Optimize(context.Background(), OptimizeOptions{All: true})
			var rr *errs.RecoveryRequired
			if !errors.As(err, &rr) {
				t.Fatalf("want RecoveryRequired, got %v", err)
			}
			failpoint.Reset()
			loadInto(t, g, "", "", "append", person("late", "Late")) // heals first
			noSidecars(t, g)
			tablesAligned(t, g)
			var kept []string
			late := 0
			for _, l := range strings.Split(sortedExport(t, g, ""), "\n") {
				if strings.Contains(l, `"handle":"late"`) {
					late++
				} else {
					kept = append(kept, l)
				}
			}
			if strings.Join(kept, "\n") != before || late != 1 {
				t.Fatalf("graph changed:\n%s\n---\n%s", before, strings.Join(kept, "\n"))
			}
			nowFrags := mainFragments(t, g)
			nowFrags["node:Person"]-- // the late load's fragment
			if compacted := fmt.Sprint(nowFrags) != fmt.Sprint(frags); compacted != c.published {
				t.Fatalf("fragments %v -> %v, compaction published: want %v", frags, nowFrags, c.published)
			}
			audit, _, err := recovery.ReadAudit(context.Background(), g.root)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, a := range audit {
				found = found || a.OperationID == rr.OperationID && a.Kind == recovery.RolledForward && a.WriterKind == string(recovery.Optimize)
			}
			if found != c.audited {
				t.Fatalf("audit row for %s: %v, want %v (%+v)", rr.OperationID, found, c.audited, audit)
			}
			assertIndexesMatchStorage(t, g)
		})
	}
}

// A lost lease before the publish stops the compaction: RecoveryRequired, and the heal still
// keeps the committed rewrites.
func TestOptimizeFence(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 3)
	lost := errors.New("lease lost")
	g.SetFence(func(context.Context) error { return lost })
	var fe *FenceError
	if _, err := g.Optimize(context.Background(), OptimizeOptions{All: true}); !errors.Is(err, lost) || !errors.As(err, &fe) || fe.Step != "arm" {
		t.Fatalf("a fence refusing before arming: %v", err)
	}
	noSidecars(t, g)
	before := mainFragments(t, g)
	calls := 0
	g.SetFence(func(context.Context) error { // arm, commit tables, publish
		if calls++; calls == 3 {
			return lost
		}
		return nil
	})
	_, err := g.Optimize(context.Background(), OptimizeOptions{All: true})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) || calls != 3 {
		t.Fatalf("want RecoveryRequired at the third fence check, got %v after %d checks", err, calls)
	}
	g.SetFence(nil)
	if res := optimize(t, g, OptimizeOptions{All: true}); res.Commit != nil {
		t.Fatalf("the heal should have published the committed rewrites, leaving nothing: %+v", res)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	if after := mainFragments(t, g); fmt.Sprint(after) == fmt.Sprint(before) {
		t.Fatalf("fragments %v unchanged", after)
	}
}

// Recovery refuses an Optimize intent whose table moved by something other than its Rewrite.
func TestOptimizeRecoveryRefusesForeignCommit(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	smallLoads(t, g, "", "p", 3)
	_ = failpoint.Enable("optimize.after_sidecar", "1*error")
	_, err := g.Optimize(context.Background(), OptimizeOptions{All: true})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatal(err)
	}
	failpoint.Reset()
	// Another writer appends to Person behind the manifest's back.
	ctx := context.Background()
	st, _ := g.Snapshot(ctx, "")
	e, _ := st.Table("node:Person")
	ds, err := lance.Open(ctx, g.root.Sub(e.Path))
	if err != nil {
		t.Fatal(err)
	}
	staged, err := ds.StageDelete(ctx, lance.In("id", "p0"), lance.StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(ctx, staged); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recover(ctx); err == nil || !strings.Contains(err.Error(), "not this intent's Rewrite") {
		t.Fatalf("recovery over a foreign commit: %v", err)
	}
	if l, _ := recovery.List(ctx, g.root); len(l) != 1 {
		t.Fatalf("the refused intent must stay: %v", l)
	}
}

// A branch forked before main was compacted merges into it as if nothing had happened: the
// rewrite is no change of main's, so a row updated on the branch is no conflict and nothing
// the compaction moved counts against the merge's budget.
func TestMergeAfterTargetCompaction(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 20)
	loadInto(t, g, "s", "main", "merge", person("p4", "P four on s"), person("new", "New"), person("p9", "P nine on s"))
	loadInto(t, g, "", "", "append", person("m", "On main")) // main moves: a three-way merge
	loadInto(t, g, "", "", "merge", person("p9", "P nine on main"))
	optimize(t, g, OptimizeOptions{Fanout: 16}) // the main-side changes now share a fragment with carried rows
	// Both sides updated p9: a conflict, compaction or not.
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main"})
	var mc *errs.MergeConflicts
	if !errors.As(err, &mc) || len(mc.Conflicts) != 1 || *mc.Conflicts[0].EntityID != "p9" || mc.Conflicts[0].Kind != "divergent_update" {
		t.Fatalf("want one divergent_update on p9, got %v", err)
	}
	loadInto(t, g, "s", "", "merge", person("p9", "P nine on main"))
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if res.Outcome != OutcomeMerged {
		t.Fatalf("merge %+v", res)
	}
	out := export(t, g, "")
	for _, want := range []string{"P four on s", `"handle":"new"`, `"handle":"m"`, "P nine on main"} {
		if !strings.Contains(out, want) {
			t.Fatalf("merged main lacks %s:\n%s", want, out)
		}
	}
	if strings.Count(out, `"handle":"p4"`) != 1 || strings.Count(out, `"type":"Person"`) != 22 {
		t.Fatalf("merged main:\n%s", out)
	}
	assertIndexesMatchStorage(t, g)
	tablesAligned(t, g)
}

// A target that only compacted since the fork still takes a stage's certified inserts: its rows
// are the base's, so the proof stands and its (empty) diff is not read.
func TestCertifiedMergeAfterTargetOnlyCompacted(t *testing.T) {
	g := testGraph(t)
	smallLoads(t, g, "", "p", 20)
	loadInto(t, g, "s", "main", "append", person("s1", "S one"), person("s2", "S two"))
	if res := optimize(t, g, OptimizeOptions{Fanout: 16}); res.Commit == nil {
		t.Fatal("main did not compact")
	}
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if r := routes(res)["node:Person"]; r != RouteCertified {
		t.Fatalf("Person merged by %q after a compaction-only target change, want certified (%+v)", r, res)
	}
	out := export(t, g, "")
	if strings.Count(out, `"type":"Person"`) != 22 || !strings.Contains(out, "S two") {
		t.Fatalf("merged main:\n%s", out)
	}
	assertIndexesMatchStorage(t, g)
	tablesAligned(t, g)
	// Once main really changed, the ordinary diff decides again.
	loadInto(t, g, "s2", "main", "append", person("s3", "S three"))
	loadInto(t, g, "", "", "merge", person("p1", "P one again"))
	if r := routes(mustMerge(t, g, MergeRequest{Source: "s2", Target: "main"}))["node:Person"]; r != RouteDiff {
		t.Fatalf("Person merged by %q after main changed, want diff", r)
	}
}

// tierRun merges a size tier once it holds fanout fragments (with the smaller ones newer than
// them), lets full fragments end runs, still merges a mix of sizes that never forms a one-tier
// run, and never rewrites large fragments for a few small ones.
func TestTierRun(t *testing.T) {
	frags := func(rows ...uint64) []lance.Fragment {
		out := make([]lance.Fragment, len(rows))
		for i, n := range rows {
			out[i] = lance.Fragment{ID: uint64(i), PhysicalRows: n}
		}
		return out
	}
	repeat := func(n int, rows ...uint64) []uint64 {
		var out []uint64
		for i := 0; i < n; i++ {
			out = append(out, rows...)
		}
		return out
	}
	for _, c := range []struct {
		name string
		rows []uint64
		want int // fragments merged (the newest ones); 0: nothing due
	}{
		{"fifteen one-row loads", repeat(15, 1), 0},
		{"sixteen one-row loads", repeat(16, 1), 16},
		{"a merged tier behind fresh loads", append([]uint64{16, 16}, repeat(16, 1)...), 16},
		{"fifteen of the next tier under a new load", append(repeat(15, 16), 1), 0},
		{"sixteen of the next tier under a new load", append(repeat(16, 16), 1), 17},
		{"big and small loads alternating, eight each", repeat(8, 5000, 1), 0},
		{"big and small loads alternating, sixteen each", repeat(16, 5000, 1), 32},
		{"fifteen big ones do not wait on small ones", append(repeat(15, 65536), repeat(15, 1)...), 0},
		{"a full fragment ends the run", append(append(repeat(10, 1), lanceTargetRows), repeat(10, 1)...), 0},
		{"full fragments only", repeat(20, lanceTargetRows), 0},
	} {
		got := tierRun(frags(c.rows...), 16, 0)
		n := len(c.rows)
		if len(got) != c.want || c.want > 0 && (got[0] != uint64(n-c.want) || got[len(got)-1] != uint64(n-1)) {
			t.Errorf("%s: merged %v, want the newest %d", c.name, got, c.want)
		}
	}
	// A fragment whose files hold half the size cap ends runs like a full one, so a table of
	// wide rows never merges its size-cut fragments again; fragments of unrecorded size count
	// by rows only.
	const capBytes = 1 << 20
	sized := func(n int, bytes uint64) []lance.Fragment {
		fs := frags(repeat(n, 100)...)
		for i := range fs {
			fs[i].Files = []lance.DataFile{{FileSizeBytes: bytes}}
		}
		return fs
	}
	if got := tierRun(sized(20, capBytes/2), 16, capBytes); got != nil {
		t.Errorf("size-full fragments merged: %v", got)
	}
	if got := tierRun(sized(20, capBytes/2-1), 16, capBytes); len(got) != 20 {
		t.Errorf("fragments under half the cap: merged %v, want all 20", got)
	}
	if got := tierRun(sized(20, 0), 16, capBytes); len(got) != 20 {
		t.Errorf("fragments of unrecorded size: merged %v, want all 20", got)
	}
	mixed := append(sized(10, 1), append(sized(1, capBytes), sized(10, 1)...)...)
	for i := range mixed {
		mixed[i].ID = uint64(i)
	}
	if got := tierRun(mixed, 16, capBytes); got != nil {
		t.Errorf("a size-full fragment did not end the run: %v", got)
	}
}

// On a table of wide rows (embeddings, documents) a compaction cuts its data files by size and
// writes each as it goes, so its memory stays near one file, and the size-cut fragments stay
// out of later merges instead of being rewritten by every one.
func TestOptimizeCutsWideRowsBySize(t *testing.T) {
	g := testGraph(t)
	rng := rand.New(rand.NewPCG(7, 8))
	name := func() string {
		b := make([]byte, 3000)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	load := func(round, n int) {
		for i := 0; i < n; i++ {
			var batch []string
			for j := 0; j < 20; j++ {
				batch = append(batch, person(fmt.Sprintf("w%d-%d-%d", round, i, j), name()))
			}
			loadInto(t, g, "", "", "append", batch...)
		}
	}
	fragments := func() []lance.Fragment {
		t.Helper()
		ctx := context.Background()
		st, err := g.Snapshot(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		e, _ := st.Table("node:Person")
		ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.AtVersion(e.Version))
		if err != nil {
			t.Fatal(err)
		}
		return ds.Manifest().Fragments
	}
	const capBytes = 256 << 10
	load(0, 16) // sixteen fragments of about 60 KB
	before := sortedExport(t, g, "")
	res := optimize(t, g, OptimizeOptions{Fanout: 16, MaxBytesPerFile: capBytes})
	if len(res.Tables) != 1 || res.Tables[0].FragmentsRemoved != 16 || res.Tables[0].FragmentsAdded < 3 {
		t.Fatalf("first compaction: %+v", res.Tables)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatal("the compaction changed the graph")
	}
	cut := map[uint64]bool{}
	for _, f := range fragments() {
		n, ok := f.FileBytes()
		if !ok || n >= 2*capBytes {
			t.Fatalf("fragment %d holds %d bytes (recorded %v), cap %d", f.ID, n, ok, capBytes)
		}
		if f.FullBySize(capBytes) {
			cut[f.ID] = true
		}
	}
	if len(cut) < 2 {
		t.Fatalf("%d size-cut fragments, want the ~1 MB cut into several", len(cut))
	}
	load(1, 16)
	before = sortedExport(t, g, "")
	res = optimize(t, g, OptimizeOptions{Fanout: 16, MaxBytesPerFile: capBytes})
	if len(res.Tables) != 1 || res.Tables[0].FragmentsRemoved > 17 {
		t.Fatalf("second compaction: %+v", res.Tables)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatal("the second compaction changed the graph")
	}
	kept := 0
	for _, f := range fragments() {
		if cut[f.ID] {
			kept++
		}
	}
	if kept != len(cut) {
		t.Fatalf("the second compaction rewrote %d of the %d size-cut fragments", len(cut)-kept, len(cut))
	}
}

// The deletion rule alone, on fragments too large for any tier run: a fragment is rewritten
// for its deletions past a tenth of its rows and deletionRewriteMinRows both, the oldest first.
func TestCompactionRunDeletionRule(t *testing.T) {
	frag := func(id, rows, deleted uint64) lance.Fragment {
		f := lance.Fragment{ID: id, PhysicalRows: rows}
		if deleted > 0 {
			f.Deletion = &lance.DeletionFile{NumDeletedRows: deleted}
		}
		return f
	}
	const big = lanceTargetRows // past half the target: no tier run takes it
	const minRows = deletionRewriteMinRows
	for _, c := range []struct {
		name  string
		frags []lance.Fragment
		want  []uint64
	}{
		{"none deleted", []lance.Fragment{frag(1, big, 0)}, nil},
		{"exactly a tenth", []lance.Fragment{frag(1, big, big/10)}, nil},
		{"past a tenth", []lance.Fragment{frag(1, big, big/10+1)}, []uint64{1}},
		{"past a tenth, under the minimum", []lance.Fragment{frag(1, 5*minRows, minRows-1)}, nil},
		{"past a tenth, at the minimum", []lance.Fragment{frag(1, 5*minRows, minRows)}, []uint64{1}},
		{"the oldest due", []lance.Fragment{frag(1, big, 1), frag(2, big, big/2), frag(3, big, big/2)}, []uint64{2}},
		{"not recorded", []lance.Fragment{frag(1, big, 0), {ID: 2, PhysicalRows: big, Deletion: &lance.DeletionFile{}}}, nil},
	} {
		if got := compactionRun(&lance.Manifest{Fragments: c.frags}, 16, 0); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// A tier run stops where an index's coverage does: a rewrite may not mix covered and
// uncovered fragments, and a run cut there would leave two parts, each short of the next
// tier. The covered fragments before the boundary wait for the fold that covers the rest, or
// for a full tier of their own.
func TestCompactionRunStopsAtTheIndexCoverage(t *testing.T) {
	fs := make([]lance.Fragment, 24)
	for i := range fs {
		fs[i] = lance.Fragment{ID: uint64(i), PhysicalRows: 1}
	}
	covering := func(n int) []lance.Index {
		var ids []uint32
		for i := range n {
			ids = append(ids, uint32(i))
		}
		return []lance.Index{{Name: "id_idx", Fragments: ids, HasFragments: true}}
	}
	for _, c := range []struct {
		name    string
		covered int
		want    int // the newest fragments merged; negative: the oldest
	}{
		{"no index", -1, 24},
		{"all covered", 24, 24},
		{"sixteen uncovered behind covered ones", 8, 16},
		{"fifteen uncovered behind covered ones", 9, 0},
		{"sixteen covered, then uncovered ones", 16, -16},
		{"fifteen covered, then uncovered ones", 15, 0},
	} {
		m := &lance.Manifest{Fragments: fs}
		if c.covered >= 0 {
			m.Indices = covering(c.covered)
		}
		got := compactionRun(m, 16, 0)
		want, first := c.want, uint64(24-c.want)
		if want < 0 {
			want, first = -want, 0
		}
		if len(got) != want || want > 0 && got[0] != first {
			t.Errorf("%s: merged %v, want %d from %d", c.name, got, want, first)
		}
	}
}

// Upserts leave deletions in old fragments that no tier run reaches: once enough of a
// fragment's rows are deleted (TestCompactionRunDeletionRule), automatic compaction rewrites
// it alone, and the graph reads the same.
func TestOptimizeRewritesDeletionHeavyFragments(t *testing.T) {
	g := testGraph(t)
	people := func(from, to int, name string) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, person(fmt.Sprintf("p%d", i), name))
		}
		return out
	}
	const rows = 8 * deletionRewriteMinRows
	loadInto(t, g, "", "", "append", people(0, rows, "P")...)
	loadInto(t, g, "", "", "merge", people(0, deletionRewriteMinRows-1, "P again")...)
	if g.CompactionDue(16) {
		t.Fatal("due under the minimum")
	}
	loadInto(t, g, "", "", "merge", person(fmt.Sprintf("p%d", deletionRewriteMinRows-1), "P again"))
	if !g.CompactionDue(16) {
		t.Fatal("not due at the minimum")
	}
	before := sortedExport(t, g, "")
	res := optimize(t, g, OptimizeOptions{Fanout: 16})
	if res.Commit == nil || len(res.Tables) != 1 || res.Tables[0].TableKey != "node:Person" || res.Tables[0].FragmentsRemoved != 1 || res.Tables[0].RowsRewritten != rows-deletionRewriteMinRows {
		t.Fatalf("result %+v", res)
	}
	if after := sortedExport(t, g, ""); after != before {
		t.Fatalf("compaction changed the graph:\n%s\n---\n%s", before, after)
	}
	for _, f := range mustDataset(t, g, "node:Person").Manifest().Fragments {
		if f.Deletion != nil {
			t.Fatalf("fragment %d keeps its deletions", f.ID)
		}
	}
	if g.CompactionDue(16) {
		t.Fatal("still due")
	}
	assertIndexesMatchStorage(t, g)
	loadInto(t, g, "", "", "merge", person("p4", "P four"))
	if out := export(t, g, ""); strings.Count(out, `"handle":"p4"`) != 1 || !strings.Contains(out, "P four") {
		t.Fatalf("upsert after the rewrite:\n%s", out)
	}
}

func mustDataset(t *testing.T, g *Graph, key string) *lance.Dataset {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e, _ := st.Table(key)
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.AtVersion(e.Version))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}
