package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// Loads into a branch fork each table on its first write there; main is untouched; the branch
// has its own head from its first commit.
func TestForkOnWriteLoads(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	mainBefore := export(t, g, "")
	// Without From the branch must exist.
	_, err := g.Load(ctx, LoadRequest{Branch: "stage-1", Mode: ModeAppend, Records: records(t, people[0])})
	var bnf *errs.BranchNotFound
	if !errors.As(err, &bnf) {
		t.Fatalf("missing branch: %v", err)
	}
	res, err := g.Load(ctx, LoadRequest{Branch: "stage-1", From: "main", Mode: ModeAppend,
		Records: records(t, `{"type":"Person","data":{"handle":"carol","name":"C","active":true}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Branch != "stage-1" || res.Commit.GraphBranch == nil || *res.Commit.GraphBranch != "stage-1" {
		t.Fatalf("receipt %+v", res)
	}
	if export(t, g, "") != mainBefore {
		t.Fatal("a branch load changed main")
	}
	branchOut := export(t, g, "stage-1")
	if !strings.Contains(branchOut, "carol") || !strings.Contains(branchOut, "alice") {
		t.Fatalf("branch export:\n%s", branchOut)
	}
	st, _ := g.Snapshot(ctx, "stage-1")
	person, _ := st.Table("node:Person")
	company, _ := st.Table("node:Company")
	if person.Branch == nil || *person.Branch != "stage-1" || company.Branch != nil {
		t.Fatalf("Person should be forked, Company inherited: %+v %+v", person, company)
	}
	// A second load on the branch writes the already-forked table.
	if _, err := g.Load(ctx, LoadRequest{Branch: "stage-1", Mode: ModeMerge,
		Records: records(t, `{"type":"Person","data":{"handle":"dave","name":"D","active":true}}`)}); err != nil {
		t.Fatal(err)
	}
	tablesAligned(t, g)
	// Branch names: Lance rules and no path-prefix collisions.
	for _, bad := range []string{"stage-1/x", "bad name", "main"} {
		if err := g.CreateBranch(ctx, bad, "main"); err == nil {
			t.Errorf("branch %q accepted", bad)
		}
	}
	bs, _ := g.Branches(ctx)
	if len(bs) != 1 || bs[0].Name != "stage-1" || bs[0].ParentBranch != "main" {
		t.Fatalf("branches %+v", bs)
	}
	if err := g.DeleteBranch(ctx, "stage-1"); err != nil {
		t.Fatal(err)
	}
	ds, _ := lance.Open(ctx, g.root.Sub(person.Path))
	if _, err := lance.ReadBranchRef(ctx, ds.Store(), "stage-1"); err == nil {
		t.Fatal("the table's branch survived the graph branch delete")
	}
	// Re-created under the same name: a fresh fork from main.
	if _, err := g.Load(ctx, LoadRequest{Branch: "stage-1", From: "main", Mode: ModeAppend,
		Records: records(t, `{"type":"Person","data":{"handle":"erin","name":"E","active":true}}`)}); err != nil {
		t.Fatal(err)
	}
	if out := export(t, g, "stage-1"); strings.Contains(out, "carol") || !strings.Contains(out, "erin") {
		t.Fatalf("re-created branch:\n%s", out)
	}
}

// A first-touch load that dies after the fork but before its commit is rolled back by recovery:
// the untouched fork stays at the inherited version and the branch reads as before.
func TestFirstTouchCrashRecovers(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if err := g.CreateBranch(ctx, "b", "main"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.after_fork", "1*error")
	_, err := g.Load(ctx, LoadRequest{Branch: "b", Mode: ModeAppend, Records: records(t, `{"type":"Person","data":{"handle":"x","name":"X","active":true}}`)})
	recoverFrom(t, g, err)
	if out := export(t, g, "b"); strings.Contains(out, `"handle":"x"`) {
		t.Fatalf("half a branch commit visible:\n%s", out)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "b", Mode: ModeAppend, Records: records(t, `{"type":"Person","data":{"handle":"x","name":"X","active":true}}`)}); err != nil {
		t.Fatalf("the same load after recovery: %v", err)
	}
}

// Branch control classifies ambiguous results by the branch identifier: a create that failed
// after its ref landed is a success, one that failed before is retried; a delete that failed
// after removing the ref is a success, one that failed before keeps its error.
func TestBranchControlAmbiguousResults(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	loadInto(t, g, "", "", "append", people...)
	t.Cleanup(failpoint.Reset)

	_ = failpoint.Enable("lance.branch.after_ref", "1*error")
	if err := g.CreateBranch(ctx, "a", "main"); err != nil {
		t.Fatalf("create whose ref landed: %v", err)
	}
	_ = failpoint.Enable("lance.branch.before_ref", "1*error") // first attempt leaves a ref-less tree
	if err := g.CreateBranch(ctx, "b", "main"); err != nil {
		t.Fatalf("create retried after a ref-less attempt: %v", err)
	}
	_ = failpoint.Enable("lance.branch.before_ref", "2*error")
	if err := g.CreateBranch(ctx, "c", "main"); err == nil {
		t.Fatal("two failed attempts reported success")
	}
	failpoint.Reset()
	bs, _ := g.Branches(ctx)
	if len(bs) != 2 || bs[0].Name != "a" || bs[1].Name != "b" {
		t.Fatalf("branches %+v", bs)
	}
	loadInto(t, g, "b", "", "append", person("zoe", "Zoe"))

	_ = failpoint.Enable("lance.branch.after_ref_delete", "1*error")
	if err := g.DeleteBranch(ctx, "a"); err != nil {
		t.Fatalf("delete whose ref is gone: %v", err)
	}
	_ = failpoint.Enable("storage.delete", "1*error")
	if err := g.DeleteBranch(ctx, "b"); err == nil {
		t.Fatal("a delete that removed nothing reported success")
	}
	failpoint.Reset()
	bs, _ = g.Branches(ctx)
	if len(bs) != 1 || bs[0].Name != "b" {
		t.Fatalf("branches after deletes %+v", bs)
	}
	if out := export(t, g, "b"); !strings.Contains(out, "zoe") {
		t.Fatal("the branch that failed to delete lost its rows")
	}
}
