package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// foreignAppendOn commits an "intruder" Person to the table key of branch ("" = main) behind
// the engine's back, as a writer outside a graph commit would.
func foreignAppendOn(t *testing.T, g *Graph, key, branch string) {
	t.Helper()
	ctx := context.Background()
	st, err := g.Snapshot(ctx, branch)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := st.Table(key)
	if !ok {
		t.Fatalf("no table %s on %q", key, branch)
	}
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(branch))
	if err != nil {
		t.Fatal(err)
	}
	recs := records(t, `{"type":"Person","data":{"handle":"intruder","name":"I","active":true}}`)
	batches, err := rows.Build(g.Catalog(), recs, ModeAppend, rows.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ds.StageAppend(ctx, []arrow.Record{batches[key].Record}, lance.StageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Commit(ctx, s); err != nil {
		t.Fatal(err)
	}
}

const dave = `{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`

func wantDrift(t *testing.T, err error, key string) {
	t.Helper()
	var de *DriftError
	if !errors.As(err, &de) || de.TableKey != key || errs.Kind(err) != errs.KindTableDrift {
		t.Fatalf("want drift of %s, got %v", key, err)
	}
}

// RestoreDrift puts drifted tables of main and of a branch back on their published versions
// and publishes them; the graph reads what it read before, and writes go on. A second run finds
// nothing to do.
func TestRestoreDrift(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	if _, err := load(t, g, "append", people[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "stage", From: "main", Mode: ModeAppend, Records: records(t, people[1])}); err != nil {
		t.Fatal(err)
	}
	before, stageBefore := export(t, g, ""), export(t, g, "stage")
	foreignAppendOn(t, g, "node:Person", "")
	foreignAppendOn(t, g, "node:Person", "stage")
	_, err := load(t, g, "append", dave)
	wantDrift(t, err, "node:Person")
	_, err = g.Load(ctx, LoadRequest{Branch: "stage", Mode: ModeAppend, Records: records(t, `{"type":"Person","data":{"handle":"carol","name":"C","active":true}}`)})
	wantDrift(t, err, "node:Person")

	out, err := g.RestoreDrift(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Branch != "main" || out[1].Branch != "stage" {
		t.Fatalf("restored %+v", out)
	}
	for _, r := range out {
		if r.TableKey != "node:Person" || r.Head != r.Published+1 || r.Restored != r.Head+1 || r.GraphCommitID == "" {
			t.Fatalf("restore %+v", r)
		}
	}
	if export(t, g, "") != before || export(t, g, "stage") != stageBefore {
		t.Fatal("the restored graph does not read as before")
	}
	tablesAligned(t, g)
	commits, err := g.Commits(ctx, "")
	if err != nil || commits[0].ActorID == nil || *commits[0].ActorID != DriftActor {
		t.Fatalf("newest commit %+v %v", commits[0], err)
	}
	if _, err := load(t, g, "append", dave); err != nil {
		t.Fatalf("write after the restore: %v", err)
	}
	if _, err := g.Load(ctx, LoadRequest{Branch: "stage", Mode: ModeAppend, Records: records(t, `{"type":"Person","data":{"handle":"carol","name":"C","active":true}}`)}); err != nil {
		t.Fatalf("branch write after the restore: %v", err)
	}
	if strings.Contains(export(t, g, "")+export(t, g, "stage"), "intruder") {
		t.Fatal("the foreign row is visible")
	}
	if out, err := g.RestoreDrift(ctx); err != nil || len(out) != 0 {
		t.Fatalf("second run: %+v %v", out, err)
	}
}

// A restore whose publish fails leaves the table drifted again (one more version ahead); the
// next run restores and publishes it.
func TestRestoreDriftPublishFailureIsRepaired(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	if _, err := load(t, g, "append", people[0]); err != nil {
		t.Fatal(err)
	}
	foreignAppendOn(t, g, "node:Person", "")
	_ = failpoint.Enable("publisher.attempt", "1*error")
	if _, err := g.RestoreDrift(ctx); !failpoint.IsInjected(err) {
		t.Fatalf("want the injected publish failure, got %v", err)
	}
	_, err := load(t, g, "append", people[1])
	wantDrift(t, err, "node:Person")
	out, err := g.RestoreDrift(ctx)
	if err != nil || len(out) != 1 || out[0].Head != out[0].Published+2 {
		t.Fatalf("second run: %+v %v", out, err)
	}
	if _, err := load(t, g, "append", people[1]); err != nil {
		t.Fatal(err)
	}
}

// RestoreDrift refuses while a recovery intent is pending, when the fence fails, and when a
// table's HEAD is behind its published version (which no restore can mend).
func TestRestoreDriftRefusals(t *testing.T) {
	ctx := context.Background()
	t.Run("pending intent", func(t *testing.T) {
		g := testGraph(t)
		t.Cleanup(failpoint.Reset)
		_ = failpoint.Enable("load.after_sidecar", "1*error")
		if _, err := load(t, g, "append", people[0]); err == nil {
			t.Fatal("want a failure")
		}
		var rr *errs.RecoveryRequired
		if _, err := g.RestoreDrift(ctx); !errors.As(err, &rr) || !strings.Contains(err.Error(), "worker recover") {
			t.Fatalf("want RecoveryRequired, got %v", err)
		}
	})
	t.Run("fence", func(t *testing.T) {
		g := testGraph(t)
		g.SetFence(func(context.Context) error { return errors.New("lease lost") })
		var fe *FenceError
		if _, err := g.RestoreDrift(ctx); !errors.As(err, &fe) {
			t.Fatalf("want a fence refusal, got %v", err)
		}
	})
	t.Run("head behind", func(t *testing.T) {
		g := testGraph(t)
		e := mustTable(t, g, "node:Person")
		if _, err := publisher.Open(g.root, "").Publish(ctx, publisher.Request{
			Updates:  []publisher.DatasetUpdate{{Identity: e.Identity, TableKey: e.TableKey, Version: e.Version + 3, Meta: e.Meta}},
			Expected: map[ids.TableIdentity]publisher.Expectation{e.Identity: {TableKey: e.TableKey, Version: e.Version}},
			Lineage:  &publisher.Lineage{CommitID: ids.NewULID(), ActorID: "other"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := g.RestoreDrift(ctx); err == nil || !strings.Contains(err.Error(), "behind its published version") {
			t.Fatalf("want a refusal, got %v", err)
		}
		if l, _ := recovery.List(ctx, g.root); len(l) != 0 {
			t.Fatal("a refusal arms nothing")
		}
	})
}

// A compaction whose table another writer moved (its HEAD probed beside the snapshot, from
// the dataset the writer holds) is refused as drift and commits nothing: staged beside the
// messages, or inline (Optimize).
func TestCompactionRefusesDrift(t *testing.T) {
	for _, staged := range []bool{true, false} {
		t.Run(fmt.Sprintf("staged=%v", staged), func(t *testing.T) {
			ctx := context.Background()
			g := testGraph(t)
			for i := range 17 {
				if _, err := load(t, g, "append", fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i)); err != nil {
					t.Fatal(err)
				}
			}
			var sc *StagedCompaction
			if staged {
				var err error
				if sc, err = g.StageCompaction(ctx, OptimizeOptions{}); err != nil || sc == nil {
					t.Fatalf("nothing staged (%v)", err)
				}
			}
			before, err := g.Snapshot(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			foreignAppendOn(t, g, "node:Person", "")
			if staged {
				_, err = g.CommitCompaction(ctx, sc)
			} else {
				_, err = g.Optimize(ctx, OptimizeOptions{})
			}
			wantDrift(t, err, "node:Person")
			after, err := g.Snapshot(ctx, "")
			if err != nil {
				t.Fatal(err)
			}
			if after.ManifestVersion != before.ManifestVersion {
				t.Fatalf("__manifest moved from %d to %d", before.ManifestVersion, after.ManifestVersion)
			}
			noSidecars(t, g)
		})
	}
}

// A load refused for drift arms its sidecar beside its revalidation, and takes it back. Tried
// again while the drift stands (a batch held for an operator, every retry_max), it revalidates
// first and writes nothing to __recovery, so an operator's RestoreDrift, which refuses while a
// sidecar is pending, never meets one of its; once restored, the load commits.
func TestDriftedLoadTriedAgainWritesNoSidecar(t *testing.T) {
	ctx := context.Background()
	g, l := tracedGraph(t, "drift-again")
	if _, err := load(t, g, "append", people[0]); err != nil {
		t.Fatal(err)
	}
	foreignAppendOn(t, g, "node:Person", "")
	puts, deletes := recoveryWrites(l)
	writes := func() int64 { return puts.Load() + deletes.Load() }
	_, err := load(t, g, "append", dave)
	wantDrift(t, err, "node:Person")
	if writes() == 0 {
		t.Fatal("the first drifted load wrote no sidecar beside its revalidation: the test sees nothing")
	}
	first := writes()
	for range 3 {
		_, err = load(t, g, "append", dave)
		wantDrift(t, err, "node:Person")
	}
	if n := writes() - first; n != 0 {
		t.Fatalf("three loads tried again on the drift made %d writes under __recovery, want none", n)
	}
	if _, err := g.RestoreDrift(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "append", dave); err != nil {
		t.Fatal(err)
	}
	if g.drifted.Load() {
		t.Fatal("a committed load left the drift mark")
	}
}
