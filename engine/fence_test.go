package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/fstree"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// treeState is every file under the graph's root with its size and modification time: equal
// states mean nothing was written or removed in between.
func treeState(t *testing.T, g *Graph) string {
	t.Helper()
	s, err := fstree.Snapshot(rootDir(t, g), true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countingFence fails from the nth check on.
func countingFence(n int, lost error) (Fence, *int) {
	calls := 0
	return func(context.Context) error {
		if calls++; calls >= n {
			return lost
		}
		return nil
	}, &calls
}

func wantFenced(t *testing.T, err, lost error, step string) {
	t.Helper()
	var fe *FenceError
	if !errors.As(err, &fe) || !errors.Is(err, lost) || !strings.HasPrefix(fe.Step, step) {
		t.Fatalf("want a FenceError before %q, got %v", step, err)
	}
}

// A writer whose fence fails writes nothing: Recover (which restores tables and publishes),
// the heal at the entry of a write and Cleanup all refuse before touching storage, and the
// pending intent is left for the writer that holds the fence.
func TestLostFenceRefusesRecoveryAndCleanup(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	smallLoads(t, g, "", "p", 3)
	_ = failpoint.Enable("load.after_table_commit", "1*error") // an Armed intent: a rollback
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("the armed load should fail")
	}
	failpoint.Reset()
	lost := errors.New("lease lost")
	g.SetFence(func(context.Context) error { return lost })
	before := treeState(t, g)
	_, err := g.Recover(ctx)
	wantFenced(t, err, lost, "recovery")
	_, err = load(t, g, "append", `{"type":"Person","data":{"handle":"zoe","name":"Z","active":true}}`)
	wantFenced(t, err, lost, "resolving intent")
	_, err = g.Cleanup(ctx, CleanupOptions{Keep: 1})
	wantFenced(t, err, lost, "cleanup")
	if after := treeState(t, g); after != before {
		t.Fatalf("a fenced writer changed storage:\nbefore\n%s\nafter\n%s", before, after)
	}
	if pendingSidecars(t, g) != 1 {
		t.Fatal("the pending intent is gone")
	}
	g.SetFence(nil)
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
}

// Recovery checks the fence again right before it publishes: a confirmed intent whose roll
// forward is fenced there stays pending and invisible, and rolls forward once the fence holds.
func TestRecoveryFencedBeforePublish(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.before_publish", "1*error") // an EffectsConfirmed intent
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("the load should fail before its publish")
	}
	failpoint.Reset()
	lost := errors.New("lease lost")
	fence, calls := countingFence(3, lost) // Recover, the intent, then its publish
	g.SetFence(fence)
	_, err := g.Recover(ctx)
	wantFenced(t, err, lost, "publish")
	if *calls != 3 || pendingSidecars(t, g) != 1 || strings.Contains(export(t, g, ""), "alice") {
		t.Fatalf("fence checks %d, sidecars %d, export:\n%s", *calls, pendingSidecars(t, g), export(t, g, ""))
	}
	g.SetFence(nil)
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	noSidecars(t, g)
	if !strings.Contains(export(t, g, ""), "alice") {
		t.Fatal("the confirmed intent did not roll forward")
	}
}

// Cleanup checks the fence again before it removes each dataset's files: fenced there, it
// has removed nothing.
func TestCleanupFencedBeforeRemoving(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	smallLoads(t, g, "", "p", 6)
	lost := errors.New("lease lost")
	fence, _ := countingFence(2, lost) // the entry passes, the first removal is fenced
	g.SetFence(fence)
	before := treeState(t, g)
	_, err := g.Cleanup(ctx, CleanupOptions{Keep: 1})
	wantFenced(t, err, lost, "cleanup of ")
	if after := treeState(t, g); after != before {
		t.Fatal("a fenced cleanup removed files")
	}
	g.SetFence(nil)
	n := rootFiles(t, g)
	res, err := g.Cleanup(ctx, CleanupOptions{Keep: 1})
	if err != nil || len(res.Datasets) == 0 || rootFiles(t, g) >= n {
		t.Fatalf("cleanup with the fence held: %+v %v", res, err)
	}
}

// A rollback fenced at its publish has restored its tables already; the writer that holds the
// fence finishes it from there (the restores are recognised, not made twice).
func TestRollbackFencedBeforePublish(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	smallLoads(t, g, "", "p", 2)
	before := export(t, g, "")
	_ = failpoint.Enable("load.after_table_commit", "1*error") // an Armed intent: a rollback
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("the armed load should fail")
	}
	failpoint.Reset()
	lost := errors.New("lease lost")
	listed, err := recovery.List(ctx, g.root)
	if err != nil || len(listed) != 1 {
		t.Fatalf("pending: %v %v", listed, err)
	}
	sc, _, err := recovery.Read(ctx, g.root, listed[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	// Recover, the intent, the rollback plan, one restore or take per table, then the publish.
	fence, _ := countingFence(3+len(sc.Tables)+1, lost)
	g.SetFence(fence)
	_, err = g.Recover(ctx)
	wantFenced(t, err, lost, "publish")
	if pendingSidecars(t, g) != 1 {
		t.Fatal("the fenced rollback retired its intent")
	}
	g.SetFence(nil)
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 1 || out[0].Action != recovery.RolledBack {
		t.Fatalf("rollback after the fence: %+v %v", out, err)
	}
	noSidecars(t, g)
	tablesAligned(t, g)
	if export(t, g, "") != before {
		t.Fatal("the rolled-back batch is visible")
	}
}

// Creating and deleting branches writes __manifest's branch refs: a writer whose fence fails
// does neither, not even the fork a load with a base makes before its own intent is armed.
func TestLostFenceRefusesBranchCreateAndDelete(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if err := g.CreateBranch(ctx, "keep", ""); err != nil {
		t.Fatal(err)
	}
	lost := errors.New("lease lost")
	g.SetFence(func(context.Context) error { return lost })
	before := treeState(t, g)
	wantFenced(t, g.CreateBranch(ctx, "new", ""), lost, "branch create")
	wantFenced(t, g.DeleteBranch(ctx, "keep"), lost, "branch delete")
	_, err := g.Load(ctx, LoadRequest{Mode: "append", Branch: "forked", From: "main",
		Records: records(t, `{"type":"Person","data":{"handle":"zoe","name":"Z","active":true}}`)})
	wantFenced(t, err, lost, "branch create")
	if after := treeState(t, g); after != before {
		t.Fatalf("a fenced writer changed storage:\nbefore\n%s\nafter\n%s", before, after)
	}
	g.SetFence(nil)
	if err := g.DeleteBranch(ctx, "keep"); err != nil {
		t.Fatal(err)
	}
	if bs, _ := g.Branches(ctx); len(bs) != 0 {
		t.Fatalf("branches left: %v", bs)
	}
}
