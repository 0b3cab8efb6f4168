package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// heldGraphWithFold is a graph holding people, its next folds doing action at load.fold.
func heldGraphWithFold(t *testing.T, action string) *Graph {
	t.Helper()
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.fold", action); err != nil {
		t.Fatal(err)
	}
	return g
}

// An append into tables the writer holds returns while its id index fold still runs; the next
// load waits for that fold before it checks keys, so a conflict with the rows just written is
// still found, and the cached indexes end equal to storage.
func TestLoadReturnsBeforeItsFold(t *testing.T) {
	g := heldGraphWithFold(t, "1*sleep(1500)")
	carol := `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`
	if _, err := load(t, g, "append", carol); err != nil {
		t.Fatal(err)
	}
	pf := g.folding
	if pf == nil {
		t.Fatal("an append into held tables left no fold behind")
	}
	select {
	case <-pf.done:
		t.Fatal("the load returned after its fold, which sleeps 1.5 s")
	default:
	}
	_, err := load(t, g, "append", carol)
	var kc *errs.KeyConflict
	if !errors.As(err, &kc) || kc.EntityID == nil || *kc.EntityID != "carol" {
		t.Fatalf("append of a key the unfinished fold holds: %v, want KeyConflict on carol", err)
	}
	if g.folding != nil {
		t.Fatal("the next load's validation left the fold unsettled")
	}
	assertIndexesMatchStorage(t, g)
}

// A fold that fails after its load returned leaves nothing wrong behind: the next load, which
// prepared on the half-folded state, prepares again on the tables read from storage.
func TestFoldFailedAfterTheLoadReturned(t *testing.T) {
	g := heldGraphWithFold(t, "1*error")
	carol := `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`
	if _, err := load(t, g, "append", carol); err != nil {
		t.Fatalf("a load whose fold fails is still published: %v", err)
	}
	_, err := load(t, g, "append", carol)
	var kc *errs.KeyConflict
	if !errors.As(err, &kc) || kc.EntityID == nil || *kc.EntityID != "carol" {
		t.Fatalf("append of a key whose fold failed: %v, want KeyConflict on carol", err)
	}
	if _, err := load(t, g, "append", `{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`); err != nil {
		t.Fatal(err)
	}
	assertIndexesMatchStorage(t, g)
}

// Writes other than a load settle the fold when they take the write gate: a merge-mode load
// (which stages its rewrites by the id index) right after an append.
func TestMergeLoadAfterAnUnfinishedFold(t *testing.T) {
	g := heldGraphWithFold(t, "1*sleep(500)")
	if _, err := load(t, g, "append", `{"type":"Person","data":{"handle":"carol","name":"Carol","active":true}}`); err != nil {
		t.Fatal(err)
	}
	res, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"carol","name":"Carol B","active":false}}`)
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit.GraphCommitID == "" {
		t.Fatal("the merge published no commit")
	}
	assertIndexesMatchStorage(t, g)
	out := export(t, g, "")
	if n := strings.Count(out, `"handle":"carol"`); n != 1 || !strings.Contains(out, `"Carol B"`) {
		t.Fatalf("carol in %d rows after the merge, want one with her new name:\n%s", n, out)
	}
}
