package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

func person(handle, name string) string {
	return fmt.Sprintf(`{"type":"Person","data":{"handle":%q,"name":%q,"active":true}}`, handle, name)
}

func loadInto(t *testing.T, g *Graph, branch, from, mode string, lines ...string) {
	t.Helper()
	if _, err := g.Load(context.Background(), LoadRequest{Branch: branch, From: from, Mode: Mode(mode), Records: records(t, lines...)}); err != nil {
		t.Fatalf("load into %s: %v", branch, err)
	}
}

// sortedExport is an export with its lines sorted: merges may write rows in another physical
// order than a direct load.
func sortedExport(t *testing.T, g *Graph, branch string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(export(t, g, branch)), "\n")
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func mustMerge(t *testing.T, g *Graph, req MergeRequest) *MergeResult {
	t.Helper()
	res, err := g.Merge(context.Background(), req)
	if err != nil {
		t.Fatalf("merge %s -> %s: %v", req.Source, req.Target, err)
	}
	return res
}

func routes(res *MergeResult) map[string]string {
	out := map[string]string{}
	for _, s := range res.Tables {
		out[s.TableKey] = s.Route
	}
	return out
}

// A pipeline step: load a stage branch from main, merge it back with delete. The target did not
// move, so this is a fast-forward; the stage only inserted, so the certified route applies.
func TestMergeFastForwardCertified(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "stage-1", "main", "append", person("carol", "Carol"), person("dave", "Dave"),
		`{"edge":"WorksAt","from":"carol","to":"acme.io","data":{"id":"w2","role":"dev"}}`)
	want := sortedExport(t, g, "stage-1")
	res := mustMerge(t, g, MergeRequest{Source: "stage-1", Target: "main", DeleteSource: true, Actor: "pipeline"})
	if res.Outcome != OutcomeFastForward || res.Commit == nil || res.Commit.MergedParentCommitID == nil {
		t.Fatalf("result %+v", res)
	}
	if r := routes(res); r["node:Person"] != RouteCertified || r["edge:WorksAt"] != RouteCertified {
		t.Fatalf("routes %v", r)
	}
	if res.BranchDeleted == nil || !*res.BranchDeleted {
		t.Fatalf("source not deleted: %+v", res)
	}
	if got := sortedExport(t, g, ""); got != want {
		t.Fatalf("main after merge:\n%s\nwant:\n%s", got, want)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	// The merged rows are in main's own files: main reads after the source is gone, from a
	// fresh handle too.
	g2, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	if got := sortedExport(t, g2, ""); got != want {
		t.Fatalf("reopened main:\n%s", got)
	}
	// The merged certificates compose: a next stage merges by the certified route again.
	loadInto(t, g, "stage-2", "main", "append", person("erin", "Erin"))
	res = mustMerge(t, g, MergeRequest{Source: "stage-2", Target: "main", DeleteSource: true})
	if routes(res)["node:Person"] != RouteCertified {
		t.Fatalf("second generation routes %v", routes(res))
	}
	// Already merged (a branch with nothing new) is a no-op.
	if err := g.CreateBranch(ctx, "idle", "main"); err != nil {
		t.Fatal(err)
	}
	if res := mustMerge(t, g, MergeRequest{Source: "idle", Target: "main"}); res.Outcome != OutcomeAlreadyUpToDate || res.Commit != nil {
		t.Fatalf("idle merge %+v", res)
	}
	_, err = g.Merge(ctx, MergeRequest{Source: "stage-2", Target: "main"})
	var bnf *errs.BranchNotFound
	if !errors.As(err, &bnf) {
		t.Fatalf("merging a deleted branch: %v", err)
	}
	if _, err := g.Merge(ctx, MergeRequest{Source: "main", Target: ""}); errs.Kind(err) != errs.KindInvalid {
		t.Fatalf("same source and target: %v", err)
	}
}

// The certified route and the ordinary diff produce the same graph.
func TestMergeRoutesAgree(t *testing.T) {
	var outs [2]string
	for i, noProof := range []bool{false, true} {
		g := testGraph(t)
		loadInto(t, g, "", "", "append", people...)
		loadInto(t, g, "s", "main", "append", person("carol", "Carol"))
		loadInto(t, g, "s", "", "append", person("dave", "Dave"), `{"edge":"WorksAt","from":"dave","to":"acme.io","data":{"id":"w9"}}`)
		res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: noProof})
		want := RouteCertified
		if noProof {
			want = RouteDiff
		}
		if routes(res)["node:Person"] != want {
			t.Fatalf("noProof=%v routes %v", noProof, routes(res))
		}
		outs[i] = sortedExport(t, g, "")
	}
	if outs[0] != outs[1] {
		t.Fatalf("routes disagree:\n%s\n---\n%s", outs[0], outs[1])
	}
	// An upsert on the branch is unfamiliar history for the proof: the diff route takes over.
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "merge", person("alice", "Alice Updated"))
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if routes(res)["node:Person"] != RouteDiff || res.Tables[0].Updated != 1 {
		t.Fatalf("upsert merge %+v", res)
	}
	if out := export(t, g, ""); !strings.Contains(out, "Alice Updated") || strings.Count(out, `"handle":"alice"`) != 1 {
		t.Fatalf("main after upsert merge:\n%s", out)
	}
}

// Both sides moved: disjoint changes merge into one commit with two parents.
func TestMergeThreeWay(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "merge", person("alice", "Alice S"), person("carol", "Carol"))
	loadInto(t, g, "", "", "merge", person("bob", "Bob Main"), person("zed", "Zed"))
	// The same row inserted identically on both sides is no conflict.
	same := `{"type":"Company","data":{"domain":"same.io","name":"Same","size":"smb"}}`
	loadInto(t, g, "s", "", "append", same)
	loadInto(t, g, "", "", "append", same)
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if res.Outcome != OutcomeMerged || res.Commit.ParentCommitID == nil || res.Commit.MergedParentCommitID == nil {
		t.Fatalf("result %+v", res)
	}
	out := export(t, g, "")
	for _, want := range []string{"Alice S", "Carol", "Bob Main", "Zed"} {
		if !strings.Contains(out, want) {
			t.Fatalf("merged main lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, `"domain":"same.io"`) != 1 || strings.Count(out, `"handle":"alice"`) != 1 {
		t.Fatalf("duplicates after merge:\n%s", out)
	}
	tablesAligned(t, g)
	// Merging main back into the branch brings the branch up to main.
	res = mustMerge(t, g, MergeRequest{Source: "main", Target: "s"})
	if res.Outcome != OutcomeFastForward {
		t.Fatalf("main into branch: %+v", res)
	}
	if sortedExport(t, g, "s") != sortedExport(t, g, "") {
		t.Fatal("branch differs from main after merging main into it")
	}
}

// Conflicts are typed, listed, and leave both branches untouched.
func TestMergeConflicts(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "merge", person("alice", "Alice S"), person("carol", "Carol S"))
	loadInto(t, g, "", "", "merge", person("alice", "Alice M"), person("carol", "Carol M"))
	mainBefore, srcBefore := export(t, g, ""), export(t, g, "s")
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main"})
	var mc *errs.MergeConflicts
	if !errors.As(err, &mc) || len(mc.Conflicts) != 2 {
		t.Fatalf("want 2 conflicts, got %v", err)
	}
	kinds := map[string]string{}
	for _, c := range mc.Conflicts {
		kinds[*c.EntityID] = c.Kind
		if c.EntityKind != "node" || c.TypeName != "Person" {
			t.Fatalf("conflict %+v", c)
		}
	}
	if kinds["alice"] != "divergent_update" || kinds["carol"] != "divergent_insert" {
		t.Fatalf("conflict kinds %v", kinds)
	}
	if errs.Kind(err) != errs.KindMergeConflict || !errs.Permanent(err) || errs.Detail(err)["merge_conflicts"] == nil {
		t.Fatalf("routing of %v", err)
	}
	if export(t, g, "") != mainBefore || export(t, g, "s") != srcBefore {
		t.Fatal("a conflicting merge changed a branch")
	}
	noSidecars(t, g)
}

// A node the source deletes while the target adds an edge to it is an orphan_edge conflict.
func TestMergeOrphanEdge(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "overwrite", `{"type":"Company","data":{"domain":"other.io","name":"Other","size":"smb"}}`,
		`{"edge":"WorksAt","from":"alice","to":"other.io","data":{"id":"w1","role":"cto"}}`)
	loadInto(t, g, "", "", "append", `{"edge":"WorksAt","from":"bob","to":"acme.io","data":{"id":"w2"}}`)
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main"})
	var mc *errs.MergeConflicts
	if !errors.As(err, &mc) || len(mc.Conflicts) != 1 || mc.Conflicts[0].Kind != "orphan_edge" || *mc.Conflicts[0].EntityID != "w2" {
		t.Fatalf("want orphan_edge on w2, got %v", err)
	}
}

// A chain of branches: A and B from main, A merges into B (B's first touch of the table), then
// B into main. Without delete the first merge forks B's ref from A's version; with delete it
// writes the rows into B's own files.
func TestMergeChainThroughBranches(t *testing.T) {
	for _, del := range []bool{false, true} {
		t.Run(fmt.Sprint("delete=", del), func(t *testing.T) {
			ctx := context.Background()
			g := testGraph(t)
			loadInto(t, g, "", "", "append", people...)
			if err := g.CreateBranch(ctx, "b", "main"); err != nil {
				t.Fatal(err)
			}
			loadInto(t, g, "a", "main", "append", person("carol", "Carol"))
			res := mustMerge(t, g, MergeRequest{Source: "a", Target: "b", DeleteSource: del})
			want := RouteRefFork
			if del {
				want = RouteDiff
			}
			if routes(res)["node:Person"] != want {
				t.Fatalf("a->b routes %v", routes(res))
			}
			if !del {
				// b's table reads a's files: a cannot be deleted under it.
				if err := g.DeleteBranch(ctx, "a"); err == nil {
					t.Fatal("deleted a branch another branch's table is forked from")
				}
			}
			res = mustMerge(t, g, MergeRequest{Source: "b", Target: "main", DeleteSource: true})
			if res.Outcome != OutcomeFastForward || res.BranchDeleted == nil || !*res.BranchDeleted {
				t.Fatalf("b->main %+v", res)
			}
			if out := export(t, g, ""); !strings.Contains(out, "Carol") {
				t.Fatalf("main after the chain:\n%s", out)
			}
			if !del {
				if err := g.DeleteBranch(ctx, "a"); err != nil {
					t.Fatalf("delete a after b is gone: %v", err)
				}
				if out := export(t, g, ""); !strings.Contains(out, "Carol") {
					t.Fatal("main lost rows when a was deleted")
				}
			}
			noSidecars(t, g)
		})
	}
}

func withChunkRows(t *testing.T, n int) {
	old := chunkRows
	chunkRows = n
	t.Cleanup(func() { chunkRows = old })
}

// Changes are cut into bounded chunks, one transaction each; a chain over 1,024 transactions is
// refused before anything is armed.
func TestMergeChunksAndChainLimit(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	var batch []string
	for i := 0; i < 7; i++ {
		batch = append(batch, person(fmt.Sprintf("p%d", i), "P"))
	}
	loadInto(t, g, "s", "main", "append", batch...)
	loadInto(t, g, "s", "", "merge", person("alice", "Alice S"), person("bob", "Bob S"))
	withChunkRows(t, 2)
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: true})
	st := res.Tables[0]
	if st.TableKey != "node:Person" || st.Inserted != 7 || st.Updated != 2 || st.Transactions != 5 {
		t.Fatalf("stats %+v", st)
	}
	if sortedExport(t, g, "") != sortedExport(t, g, "s") {
		t.Fatal("main differs from the merged branch")
	}
	tablesAligned(t, g)

	withChunkRows(t, 1)
	batch = batch[:0]
	for i := 0; i < 1025; i++ {
		batch = append(batch, person(fmt.Sprintf("q%d", i), "Q"))
	}
	loadInto(t, g, "s2", "main", "append", batch...)
	before := export(t, g, "")
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s2", Target: "main"})
	var rl *errs.ResourceLimitExceeded
	if !errors.As(err, &rl) || rl.Resource != "branch-merge recovery transactions for node:Person" || rl.Limit != 1024 || rl.Actual != 1025 {
		t.Fatalf("want the chain limit, got %v", err)
	}
	if export(t, g, "") != before {
		t.Fatal("a refused merge changed main")
	}
	noSidecars(t, g)
}

// A merge that fails at any step after arming returns RecoveryRequired; recovery leaves the
// target either fully merged or untouched and the source intact, and the merge then completes.
func TestMergeFailuresRecover(t *testing.T) {
	for _, fp := range []string{"merge.after_arm", "merge.after_fork", "merge.after_chain_commit", "merge.after_confirm",
		"merge.before_publish", "merge.after_publish"} {
		t.Run(fp, func(t *testing.T) {
			ctx := context.Background()
			g := testGraph(t)
			loadInto(t, g, "", "", "append", people...)
			loadInto(t, g, "s", "main", "merge", person("alice", "Alice S"), person("carol", "Carol"))
			target := ""
			if fp == "merge.after_fork" {
				target = "t" // a first-touch target: the fork step exists there
				if err := g.CreateBranch(ctx, "t", "main"); err != nil {
					t.Fatal(err)
				}
			}
			src, before := sortedExport(t, g, "s"), sortedExport(t, g, target)
			withChunkRows(t, 1)
			t.Cleanup(failpoint.Reset)
			_ = failpoint.Enable(fp, "1*error")
			_, err := g.Merge(ctx, MergeRequest{Source: "s", Target: target, DeleteSource: target != "", NoCertifiedRoute: true})
			recoverFrom(t, g, err)
			after := sortedExport(t, g, target)
			if after != before && after != src {
				t.Fatalf("half a merge visible:\n%s", after)
			}
			if sortedExport(t, g, "s") != src {
				t.Fatal("the source changed")
			}
			if after == before {
				mustMerge(t, g, MergeRequest{Source: "s", Target: target})
			}
			if got := sortedExport(t, g, target); got != src {
				t.Fatalf("after retry:\n%s\nwant:\n%s", got, src)
			}
			tablesAligned(t, g)
		})
	}
}

// A merge carrying a receipt is applied once: the same receipt again (a redelivered merge
// request) is recognised, even after the source branch was deleted.
func TestMergeReceipt(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", person("carol", "Carol"))
	rc := &publisher.Receipt{Stream: "OMNIGRAPH_DEMO", Sequence: 9, MsgID: "m-1"}
	first := mustMerge(t, g, MergeRequest{Source: "s", Target: "main", DeleteSource: true, Receipt: rc})
	again := mustMerge(t, g, MergeRequest{Source: "s", Target: "main", DeleteSource: true, Receipt: rc})
	if !again.AlreadyApplied || again.Commit == nil || again.Commit.GraphCommitID != first.Commit.GraphCommitID {
		t.Fatalf("redelivered merge %+v", again)
	}
	if strings.Count(export(t, g, ""), `"handle":"carol"`) != 1 {
		t.Fatal("merge applied twice")
	}
}

// The merged graph must keep @unique and @card even when each side alone does.
func TestMergeUniqueAndCardinality(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", `{"type":"Person","data":{"handle":"carol","name":"C","active":true,"email":"x@y.io"}}`,
		`{"edge":"WorksAt","from":"bob","to":"acme.io","data":{"id":"w2"}}`)
	loadInto(t, g, "", "", "append", `{"type":"Person","data":{"handle":"dave","name":"D","active":true,"email":"x@y.io"}}`,
		`{"type":"Company","data":{"domain":"same.io","name":"Same","size":"smb"}}`,
		`{"edge":"WorksAt","from":"bob","to":"same.io","data":{"id":"w3"}}`)
	before := export(t, g, "")
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main"})
	var mc *errs.MergeConflicts
	if !errors.As(err, &mc) {
		t.Fatalf("want conflicts, got %v", err)
	}
	kinds := map[string]string{}
	for _, c := range mc.Conflicts {
		kinds[c.Kind] = *c.EntityID
	}
	if kinds["cardinality_violation"] != "bob" {
		t.Fatalf("conflicts %+v", mc.Conflicts)
	}
	if export(t, g, "") != before {
		t.Fatal("a refused merge changed main")
	}
	// Without the edge clash the email clash is what remains.
	g = testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", `{"type":"Person","data":{"handle":"carol","name":"C","active":true,"email":"x@y.io"}}`)
	loadInto(t, g, "", "", "append", `{"type":"Person","data":{"handle":"dave","name":"D","active":true,"email":"x@y.io"}}`)
	_, err = g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main"})
	if !errors.As(err, &mc) || len(mc.Conflicts) != 1 || mc.Conflicts[0].Kind != "unique_violation" || *mc.Conflicts[0].EntityID != "carol" {
		t.Fatalf("want a unique_violation on carol, got %v", err)
	}
	// @unique columns do not keep a pure-insert branch off the certified route.
	g = testGraph(t)
	loadInto(t, g, "", "", "append", `{"type":"Person","data":{"handle":"erin","name":"E","active":true,"email":"e@y.io"}}`)
	loadInto(t, g, "s", "main", "append", `{"type":"Person","data":{"handle":"fay","name":"F","active":true,"email":"f@y.io"}}`)
	res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if routes(res)["node:Person"] != RouteCertified {
		t.Fatalf("routes %v", routes(res))
	}
}

// A confirmed merge whose target moved before it could publish (another writer won the target
// head) is compensated, never re-parented: recovery restores the merge's chains and keeps the
// winner's commit.
func TestMergeRecoveryCompensatesWhenTargetMoved(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", person("carol", "Carol"))
	before := sortedExport(t, g, "")
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("merge.after_confirm", "1*error")
	_, err := g.Merge(ctx, MergeRequest{Source: "s", Target: "main"})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	failpoint.Reset()
	// Another writer's lineage-only commit moves main's head under the pending merge.
	winner := "01JZZZZZZZZZZZZZZZZZZZZZZZ"
	if _, err := publisher.Open(g.root, "").Publish(ctx, publisher.Request{
		Lineage: &publisher.Lineage{CommitID: winner, ActorID: "other", CreatedAt: 1}}); err != nil {
		t.Fatal(err)
	}
	out, err := g.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Action != "RolledBack" {
		t.Fatalf("recovery %+v", out)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	if got := sortedExport(t, g, ""); got != before {
		t.Fatalf("main after compensation:\n%s", got)
	}
	st, _ := g.Snapshot(ctx, "")
	if _, ok, _ := st.Commit(ctx, winner, 0); !ok {
		t.Fatal("the winner's commit is gone")
	}
	// The merge can be run again against the new head.
	mustMerge(t, g, MergeRequest{Source: "s", Target: "main"})
	if !strings.Contains(export(t, g, ""), "Carol") {
		t.Fatal("the retried merge did not land")
	}
}

// A foreign commit on top of a partial merge chain is never restored through: recovery fails
// closed and leaves the intent for an operator.
func TestMergeRecoveryFailsClosedOnForeignCommit(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", person("carol", "Carol"), person("dave", "Dave"))
	withChunkRows(t, 1)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("merge.after_chain_commit", "1*error")
	_, err := g.Merge(ctx, MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: true})
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	failpoint.Reset()
	// Someone else commits to main's Person table above the merge's first chain step.
	e := mustTable(t, g, "node:Person")
	ds, err := lance.Open(ctx, g.root.Sub(e.Path))
	if err != nil {
		t.Fatal(err)
	}
	staged, err := ds.StageDelete(ctx, lance.In("id", "bob"), lance.StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(ctx, staged); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Recover(ctx); err == nil || !strings.Contains(err.Error(), "not this merge's") {
		t.Fatalf("want a fail-closed refusal, got %v", err)
	}
	if l, _ := recovery.List(ctx, g.root); len(l) != 1 {
		t.Fatalf("the intent should stay for an operator: %v", l)
	}
}

// The rows a merge plan holds in memory are bounded: over the budget the merge is refused
// before anything is written; the certified route holds no rows and is not affected.
func TestMergeRetainedDeltaLimit(t *testing.T) {
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	loadInto(t, g, "s", "main", "append", person("carol", "Carol"), person("dave", "Dave"))
	old := retainedLimit
	retainedLimit = 64
	t.Cleanup(func() { retainedLimit = old })
	before := export(t, g, "")
	_, err := g.Merge(context.Background(), MergeRequest{Source: "s", Target: "main", NoCertifiedRoute: true})
	var rl *errs.ResourceLimitExceeded
	if !errors.As(err, &rl) || rl.Resource != "branch-merge retained validation delta bytes" || rl.Limit != 64 || rl.Actual <= 64 {
		t.Fatalf("want the retained-delta limit, got %v", err)
	}
	if export(t, g, "") != before {
		t.Fatal("a refused merge changed main")
	}
	noSidecars(t, g)
	if res := mustMerge(t, g, MergeRequest{Source: "s", Target: "main"}); routes(res)["node:Person"] != RouteCertified {
		t.Fatalf("certified merge %+v", res)
	}
}
