package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

func auditRows(t *testing.T, g *Graph) []recovery.AuditRow {
	t.Helper()
	rows, _, err := recovery.ReadAudit(context.Background(), g.root)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// tablesAligned checks every table's Lance HEAD equals its manifest pin.
func tablesAligned(t *testing.T, g *Graph) {
	t.Helper()
	for key, v := range tableVersions(t, g) {
		if v[0] != v[1] {
			t.Fatalf("%s: published %d, Lance HEAD %d", key, v[0], v[1])
		}
	}
}

// A confirmed intent whose publish failed is finished by the next write's heal, under its
// original commit id, and audited once.
func TestHealRollsConfirmedIntentForward(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.before_publish", "1*error")
	_, err := load(t, g, "append", people...)
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	if strings.Contains(export(t, g, ""), "alice") {
		t.Fatal("half a commit is visible")
	}
	res, err := load(t, g, "append", `{"type":"Person","data":{"handle":"zoe","name":"Z","active":true}}`)
	if err != nil {
		t.Fatalf("write after the heal: %v", err)
	}
	out := export(t, g, "")
	if !strings.Contains(out, "alice") || !strings.Contains(out, "zoe") {
		t.Fatalf("rolled-forward batch missing:\n%s", out)
	}
	rows := auditRows(t, g)
	if len(rows) != 1 || rows[0].Kind != recovery.RolledForward || rows[0].OperationID != rr.OperationID {
		t.Fatalf("audit %+v", rows)
	}
	cs, _ := g.Commits(context.Background(), "")
	if len(cs) != 3 || cs[1].GraphCommitID != rows[0].GraphCommitID || res.Commit.ParentCommitID == nil || *res.Commit.ParentCommitID != cs[1].GraphCommitID {
		t.Fatalf("lineage %+v", cs)
	}
	tablesAligned(t, g)
	noSidecars(t, g)
}

// A load leaves the heal to its revalidation (no round trip of its own), but a refusal it
// meets before that is judged on a healed graph: a dead writer's confirmed overwrite that
// removed the key the batch would conflict on is rolled forward first, and the batch goes in,
// as it did when every write healed before it prepared.
func TestRefusalJudgedAfterTheHeal(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	loadInto(t, g, "", "", "append", person("a", "A"), person("b", "B"))
	_ = failpoint.Enable("load.before_publish", "1*error")
	var rr *errs.RecoveryRequired
	if _, err := load(t, g, "overwrite", person("b", "B")); !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	if !strings.Contains(export(t, g, ""), `"a"`) {
		t.Fatal("the overwrite is visible before its heal")
	}
	if _, err := load(t, g, "append", person("a", "A again")); err != nil {
		t.Fatalf("append of a key the confirmed overwrite removed: %v", err)
	}
	out := export(t, g, "")
	if !strings.Contains(out, "A again") || !strings.Contains(out, `"b"`) {
		t.Fatalf("after the heal and the append:\n%s", out)
	}
	if rows := auditRows(t, g); len(rows) != 1 || rows[0].OperationID != rr.OperationID || rows[0].Kind != recovery.RolledForward {
		t.Fatalf("audit %+v", rows)
	}
	tablesAligned(t, g)
	noSidecars(t, g)
}

// An intent that moved some tables but never confirmed blocks writes until a read-write open
// rolls it back: tables restored, a rollback commit by the recovery actor, one audit row.
func TestOpenRollsArmedIntentBack(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.after_table_commit", "1*error")
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("want a failure")
	}
	failpoint.Reset()
	var rr *errs.RecoveryRequired
	if _, err := load(t, g, "append", people[0]); !errors.As(err, &rr) || !strings.Contains(err.Error(), "worker recover") {
		t.Fatalf("write past an armed intent: %v", err)
	}
	g2, err := Open(ctx, g.root) // read-write open: full recovery
	if err != nil {
		t.Fatal(err)
	}
	tablesAligned(t, g2)
	noSidecars(t, g2)
	if out := export(t, g2, ""); out != "" {
		t.Fatalf("rolled-back batch visible:\n%s", out)
	}
	rows := auditRows(t, g2)
	if len(rows) != 1 || rows[0].Kind != recovery.RolledBack || len(rows[0].Outcomes) == 0 {
		t.Fatalf("audit %+v", rows)
	}
	st, _ := g2.Snapshot(ctx, "")
	if c, _, _ := st.Commit(ctx, rows[0].GraphCommitID, 0); c.Meta.ActorID != recovery.RecoveryActor {
		t.Fatalf("rollback commit %+v", c)
	}
	if _, err := load(t, g2, "append", people...); err != nil {
		t.Fatalf("the same load after recovery: %v", err)
	}
	tablesAligned(t, g2)
}

// A sidecar whose delete failed is finalized by the next write (its commit is visible).
func TestSidecarDeleteFailureHealedByNextWrite(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable(recovery.FailpointDelete, "1*error")
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if l, _ := recovery.List(context.Background(), g.root); len(l) != 1 {
		t.Fatalf("the failed delete should leave the sidecar: %v", l)
	}
	if _, err := load(t, g, "append", `{"type":"Person","data":{"handle":"zoe","name":"Z","active":true}}`); err != nil {
		t.Fatal(err)
	}
	noSidecars(t, g)
	if rows := auditRows(t, g); len(rows) != 1 || rows[0].Kind != recovery.RolledForward {
		t.Fatalf("audit %+v", rows)
	}
}

// An audit append failure after the roll-forward publish keeps the sidecar; the retry records
// exactly one audit row.
func TestAuditFailureKeepsSidecarAndRetryAuditsOnce(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.before_publish", "1*error")
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("want a failure")
	}
	_ = failpoint.Enable(recovery.FailpointAuditAppend, "1*error")
	if _, err := g.Recover(ctx); !failpoint.IsInjected(err) {
		t.Fatalf("want the injected audit failure, got %v", err)
	}
	if l, _ := recovery.List(ctx, g.root); len(l) != 1 {
		t.Fatal("sidecar not kept after the audit failure")
	}
	if !strings.Contains(export(t, g, ""), "alice") {
		t.Fatal("the roll-forward publish should already be visible")
	}
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	noSidecars(t, g)
	if rows := auditRows(t, g); len(rows) != 1 {
		t.Fatalf("want exactly one audit row, got %+v", rows)
	}
}

// A recovery directory that cannot be listed fails writes and opens loudly.
func TestListFailureFailsLoudly(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable(recovery.FailpointList, "error")
	if _, err := load(t, g, "append", people...); !failpoint.IsInjected(err) {
		t.Fatalf("write: %v", err)
	}
	if _, err := Open(ctx, g.root); !failpoint.IsInjected(err) {
		t.Fatalf("open: %v", err)
	}
}

// The receipt travels in the sidecar: after recovery rolls a commit forward, a redelivery of
// the same message is recognised instead of applied again.
func TestReceiptSurvivesRollForward(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	req := LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: &publisher.Receipt{Stream: "S", Sequence: 9, MsgID: "m-9"}}
	_ = failpoint.Enable("load.before_publish", "1*error")
	if _, err := g.Load(ctx, req); err == nil {
		t.Fatal("want a failure")
	}
	if _, err := g.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := g.Load(ctx, req)
	if err != nil || !res.AlreadyApplied {
		t.Fatalf("redelivery after roll-forward: %+v %v", res, err)
	}
}

// A foreign commit on top of this intent's own effect buries it: recovery refuses to restore
// through it, and the sidecar stays for an operator.
func TestRecoveryFailsClosedOnBuriedEffect(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.after_confirm", "1*error") // Person committed and confirmed
	if _, err := load(t, g, "append", people[0]); err == nil {
		t.Fatal("want a failure")
	}
	foreignAppend(t, g, "node:Person")
	// The token still holds but the HEAD is not the confirmed version: roll back, which must
	// refuse to restore through the foreign commit.
	_, err := g.Recover(ctx)
	if err == nil || !strings.Contains(err.Error(), "buried") {
		t.Fatalf("want a fail-closed refusal, got %v", err)
	}
	if errs.Kind(err) != errs.KindTableDrift || !errs.NeedsOperator(err) {
		t.Fatalf("a foreign commit over an intent's effect: kind %q", errs.Kind(err))
	}
	if l, _ := recovery.List(ctx, g.root); len(l) != 1 {
		t.Fatal("the sidecar must stay for inspection")
	}
}

// A moved table with no effect of this intent is not recovery's to fix: the empty intent is
// discarded and writes then report the uncovered drift.
func TestForeignDriftIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.after_sidecar", "1*error")
	if _, err := load(t, g, "append", people[0]); err == nil {
		t.Fatal("want a failure")
	}
	foreignAppend(t, g, "node:Person")
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 1 || out[0].Action != recovery.Discarded {
		t.Fatalf("recover: %+v %v", out, err)
	}
	var de *DriftError
	_, err = load(t, g, "append", people[1])
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "worker recover --root <root> --restore-drift") || de.Path == "" ||
		!strings.Contains(err.Error(), de.Path) {
		t.Fatalf("write over uncovered drift: %v", err)
	}
	if errs.Kind(err) != errs.KindTableDrift || errs.ExitCode(err) != errs.ExitOperator {
		t.Fatalf("drift: kind %q", errs.Kind(err))
	}
}

// A confirmed intent whose branch authority moved is rolled back, never re-parented.
func TestChangedAuthorityRollsBack(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.before_publish", "1*error")
	if _, err := load(t, g, "append", people...); err == nil {
		t.Fatal("want a failure")
	}
	// Another writer publishes on main (bypassing the heal), moving graph_head:main.
	if _, err := publisher.Open(g.root, "").Publish(ctx, publisher.Request{Lineage: &publisher.Lineage{CommitID: ids.NewULID(), ActorID: "other"}}); err != nil {
		t.Fatal(err)
	}
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 1 || out[0].Action != recovery.RolledBack {
		t.Fatalf("recover: %+v %v", out, err)
	}
	tablesAligned(t, g)
	if strings.Contains(export(t, g, ""), "alice") {
		t.Fatal("the re-parented batch is visible")
	}
}

// A corrupt sidecar is refused loudly by a read-write open and left for inspection.
func TestCorruptSidecarRefusedLoudly(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	name := recovery.Key(ids.NewULID())
	if err := g.root.Put(ctx, name, []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	var se *recovery.SidecarError
	_, err := Open(ctx, g.root)
	if !errors.As(err, &se) {
		t.Fatalf("open with a corrupt sidecar: %v", err)
	}
	if errs.Kind(err) != errs.KindCorrupt || !errs.NeedsOperator(err) {
		t.Fatalf("corrupt sidecar: kind %q", errs.Kind(err))
	}
	// A write meets it in its heal, and so does the worker: the graph needs an operator.
	if _, err := load(t, g, "append", people[0]); errs.Kind(err) != errs.KindCorrupt {
		t.Fatalf("write over a corrupt sidecar: kind %q: %v", errs.Kind(err), err)
	}
	if ok, _ := g.root.Exists(ctx, name); !ok {
		t.Fatal("the corrupt sidecar was removed")
	}
}

// foreignAppend commits a row to a table behind the engine's back.
func foreignAppend(t *testing.T, g *Graph, key string) {
	t.Helper()
	foreignAppendOn(t, g, key, "")
}

// The confirmation is written while the publish stages its files: when it fails, the publish
// must not commit. Nothing is visible, the Armed sidecar stays, and recovery rolls the moved
// tables back; the same load then lands once.
func TestFailedConfirmationStopsTheStagedPublish(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	before := export(t, g, "")
	_ = failpoint.Enable(recovery.FailpointConfirm, "1*error")
	var rr *errs.RecoveryRequired
	if _, err := load(t, g, "append", people...); !errors.As(err, &rr) || !strings.Contains(rr.Reason, recovery.FailpointConfirm) {
		t.Fatalf("want RecoveryRequired from the injected confirmation failure, got %v", err)
	}
	if got := export(t, g, ""); got != before {
		t.Fatalf("a load whose confirmation failed became visible:\n%s", got)
	}
	l, err := recovery.List(ctx, g.root)
	if err != nil || len(l) != 1 {
		t.Fatalf("sidecars %v, %v; want the armed one", l, err)
	}
	sc, _, err := recovery.Read(ctx, g.root, l[0].Name)
	if err != nil || sc.ProtocolV3.EffectPhase != recovery.Armed {
		t.Fatalf("sidecar %+v, %v; want it still Armed", sc, err)
	}
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 1 || out[0].Action != recovery.RolledBack {
		t.Fatalf("recover: %+v %v", out, err)
	}
	for key, v := range tableVersions(t, g) {
		if v[0] != v[1] {
			t.Fatalf("%s: published %d, HEAD %d after recovery", key, v[0], v[1])
		}
	}
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if got := export(t, g, ""); strings.Count(got, "\n") != len(people) {
		t.Fatalf("after the retry:\n%s", got)
	}
}

// The tables' files are written beside the sidecar: when one fails, nothing has moved, the
// load fails with the write's error (not RecoveryRequired), the intent is taken back, and
// the next load is not blocked.
func TestFailedTableFileWriteTakesTheIntentBack(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	before := tableVersions(t, g)
	_ = failpoint.Enable("lance.write_data_file", "1*error")
	_, err := load(t, g, "append", people...)
	var rr *errs.RecoveryRequired
	if !failpoint.IsInjected(err) || errors.As(err, &rr) {
		t.Fatalf("want the injected write failure, not RecoveryRequired: %v", err)
	}
	noSidecars(t, g)
	if after := tableVersions(t, g); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("tables moved: %v -> %v", before, after)
	}
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if got := export(t, g, ""); strings.Count(got, "\n") != len(people) {
		t.Fatalf("after the retry:\n%s", got)
	}
}

// If the intent cannot be taken back either, the load reports RecoveryRequired and recovery
// retires the effectless intent: it takes the versions the load planned (so that a writer
// still alive could not commit them) and publishes the takes, rows unchanged.
func TestFailedTableFileWriteAndRetire(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("lance.write_data_file", "1*error")
	_ = failpoint.Enable(recovery.FailpointDelete, "1*error")
	var rr *errs.RecoveryRequired
	if _, err := load(t, g, "append", people...); !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	before := export(t, g, "")
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 1 || out[0].Action != recovery.RolledBack || len(out[0].Tables) == 0 {
		t.Fatalf("recover: %+v %v", out, err)
	}
	if export(t, g, "") != before {
		t.Fatal("the takes changed rows")
	}
	tablesAligned(t, g)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
}
