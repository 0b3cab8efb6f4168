package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

func testGraph(t testing.TB) *Graph {
	t.Helper()
	root, _ := graphtest.Root(t)
	g, err := Init(context.Background(), root, graphtest.Schema(t, graphtest.Example))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func records(t testing.TB, lines ...string) []framing.Record {
	t.Helper()
	recs, err := framing.ParseBytes([]byte(strings.Join(lines, "\n")), framing.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func load(t testing.TB, g *Graph, mode string, lines ...string) (*LoadResult, error) {
	t.Helper()
	return g.Load(context.Background(), LoadRequest{Mode: rows.Mode(mode), Records: records(t, lines...)})
}

func export(t testing.TB, g *Graph, branch string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := g.Export(context.Background(), branch, 0, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

var people = []string{
	`{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}`,
	`{"type":"Person","data":{"handle":"bob","name":"Bob","active":false}}`,
	`{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"smb"}}`,
	`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"cto"}}`,
}

// tableVersions returns every table's published version and Lance HEAD.
func tableVersions(t *testing.T, g *Graph) map[string][2]uint64 {
	t.Helper()
	ctx := context.Background()
	st, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]uint64{}
	for _, e := range snap.Tables() {
		ds, err := lance.Open(ctx, g.root.Sub(e.Path))
		if err != nil {
			t.Fatal(err)
		}
		out[e.TableKey] = [2]uint64{e.Version, ds.Version()}
	}
	return out
}

// recoverFrom requires err to be RecoveryRequired, disarms the failpoints and recovers the
// graph, leaving no sidecar.
func recoverFrom(t *testing.T, g *Graph, err error) {
	t.Helper()
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) {
		t.Fatalf("want RecoveryRequired, got %v", err)
	}
	failpoint.Reset()
	if _, err := g.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	noSidecars(t, g)
}

func noSidecars(t *testing.T, g *Graph) {
	t.Helper()
	l, err := recovery.List(context.Background(), g.root)
	if err != nil || len(l) != 0 {
		t.Fatalf("sidecars left: %v %v", l, err)
	}
}

func TestInitAndReopen(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	for _, f := range []string{"_schema.pg", "_schema.ir.json", "__schema_state.json"} {
		if ok, _ := g.root.Exists(ctx, f); !ok {
			t.Fatalf("%s missing", f)
		}
	}
	if ok, _ := g.root.Exists(ctx, InitClaimFile); ok {
		t.Fatal("init claim left behind")
	}
	for key, v := range tableVersions(t, g) {
		if v != [2]uint64{1, 1} {
			t.Fatalf("%s: published/HEAD %v, want 1/1", key, v)
		}
	}
	if _, err := Init(ctx, g.root, graphtest.Schema(t, graphtest.Example)); err == nil {
		t.Fatal("second init accepted")
	}
	if ok, _ := g.root.Exists(ctx, InitClaimFile); ok {
		t.Fatal("refused init left its claim")
	}
	if _, err := Open(ctx, g.root); err != nil {
		t.Fatal(err)
	}
	// The v6 stamp lands in __manifest's creating commit, and genesis has one commit and head.
	ds, err := lance.Open(ctx, g.root.Sub(publisher.Dir))
	if err != nil || ds.Version() != 1 || string(ds.Schema().Metadata[publisher.StampKey]) != "6" {
		t.Fatalf("__manifest v%d stamp %q: %v", ds.Version(), ds.Schema().Metadata[publisher.StampKey], err)
	}
	st, _ := g.Snapshot(ctx, "")
	cs, _ := st.AllCommits(ctx)
	if h, ok := st.Head(""); !ok || len(cs) != 1 || cs[0].ID != h || cs[0].ManifestVersion != 1 || len(st.Tables()) != 8 {
		t.Fatalf("genesis: head %q %v, commits %+v, %d tables", h, ok, cs, len(st.Tables()))
	}
}

func TestAppendThenConflict(t *testing.T) {
	g := testGraph(t)
	res, err := load(t, g, "append", people...)
	if err != nil {
		t.Fatal(err)
	}
	if res.TotalEntities != 4 || res.Commit.GraphManifestVersion != 2 || len(res.Nodes) != 2 || res.Nodes[1].EntitiesLoaded != 2 {
		t.Fatalf("receipt %+v", res)
	}
	want := tableVersions(t, g)
	if want["node:Person"] != [2]uint64{2, 2} || want["edge:WorksAt"] != [2]uint64{2, 2} || want["node:Doc"] != [2]uint64{1, 1} {
		t.Fatalf("versions %v", want)
	}
	files := func() string {
		objs, err := g.root.List(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(objs)
	}
	filesBefore := files()
	_, err = load(t, g, "append", `{"type":"Person","data":{"handle":"carol","name":"C","active":true}}`, people[1])
	var kc *errs.KeyConflict
	if !errors.As(err, &kc) || kc.TypeKey != "node:Person" || kc.EntityID == nil || *kc.EntityID != "bob" {
		t.Fatalf("append of an existing id: %v", err)
	}
	if got := tableVersions(t, g); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a refused load moved tables: %v -> %v", want, got)
	}
	if filesBefore != files() {
		t.Fatal("a refused load left files in storage")
	}
	noSidecars(t, g)
	// The strict insert commits the certified insert-only Update.
	ds, _ := lance.Open(context.Background(), g.root.Sub(mustTable(t, g, "node:Person").Path))
	txn, err := ds.ReadTransaction(context.Background(), 2)
	if err != nil || txn.Op.Kind != lance.OpUpdate || txn.Properties[lance.InsertAbsenceProperty] != "v1" {
		t.Fatalf("certificate: %+v %v", txn, err)
	}
	// Graph commits record their transactions inline only: no _transactions/ file (version 1,
	// from init, has one).
	for _, dir := range []string{mustTable(t, g, "node:Person").Path, "__manifest"} {
		txns, err := g.root.List(context.Background(), dir+"/_transactions")
		if err != nil || len(txns) != 1 {
			t.Fatalf("%s/_transactions: %v, %v; want only version 1's", dir, txns, err)
		}
	}
}

func mustTable(t *testing.T, g *Graph, key string) publisher.TableEntry {
	t.Helper()
	st, err := g.Snapshot(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	e, ok := st.Table(key)
	if !ok {
		t.Fatalf("no table %s", key)
	}
	return e
}

func TestMergeReplacesWholeEntities(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"alice","name":"Alice A","active":false,"email":"a@x","skills":["go"]}}`); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, g, "merge",
		`{"type":"Person","data":{"handle":"alice","name":"Alice B","active":true}}`,
		`{"type":"Person","data":{"handle":"dave","name":"Dave","active":true}}`,
		`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"first"}}`,
		`{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1","role":"second"}}`) // last write wins by id
	if err != nil {
		t.Fatal(err)
	}
	out := export(t, g, "")
	if !strings.Contains(out, `"email":null,"handle":"alice","id":"alice","name":"Alice B","skills":null`) {
		t.Fatalf("merge did not replace the whole entity:\n%s", out)
	}
	if !strings.Contains(out, `"role":"second"`) || strings.Contains(out, `"role":"first"`) || strings.Count(out, `"edge":"WorksAt"`) != 1 {
		t.Fatalf("last write did not win:\n%s", out)
	}
	// A duplicated @key inside one batch is a @unique violation in every mode.
	_, err = load(t, g, "merge", `{"type":"Person","data":{"handle":"eve","name":"E","active":true}}`,
		`{"type":"Person","data":{"handle":"eve","name":"E2","active":true}}`)
	if err == nil || !strings.Contains(err.Error(), "@unique violation on Person.handle") {
		t.Fatalf("duplicate key in batch: %v", err)
	}
	if strings.Count(out, `"type":"Person"`) != 3 {
		t.Fatalf("want 3 people:\n%s", out)
	}
}

func TestOverwriteAndEmptyOverwrite(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", people[:3]...); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "overwrite", `{"type":"Person","data":{"handle":"zed","name":"Z","active":true}}`); err != nil {
		t.Fatal(err)
	}
	out := export(t, g, "")
	if strings.Contains(out, "alice") || !strings.Contains(out, "zed") || !strings.Contains(out, "acme.io") {
		t.Fatalf("overwrite replaced the wrong image:\n%s", out)
	}
}

func TestOverwriteRefusesOrphaningRetainedEdges(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, g, "overwrite", `{"type":"Person","data":{"handle":"bob","name":"B","active":true}}`)
	var ii *errs.InvalidInput
	if !errors.As(err, &ii) || !strings.Contains(ii.Error(), "alice") {
		t.Fatalf("orphaning overwrite: %v", err)
	}
}

func TestEdgeEndpointsAndCardinality(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	before := tableVersions(t, g)
	_, err := load(t, g, "append", `{"edge":"WorksAt","from":"nobody","to":"acme.io"}`)
	var ii *errs.InvalidInput
	if !errors.As(err, &ii) || ii.Line != 1 || !strings.Contains(ii.Error(), "src 'nobody' not found in Person") {
		t.Fatalf("dangling src: %v", err)
	}
	// WorksAt is @card(0..1): a second employer for alice is refused.
	_, err = load(t, g, "append", `{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb"}}`,
		`{"edge":"WorksAt","from":"alice","to":"b.io","data":{"id":"w2"}}`)
	if !errors.As(err, &ii) || !strings.Contains(ii.Error(), "@card violation on edge WorksAt: source 'alice' has 2 edges (max 1)") {
		t.Fatalf("card: %v", err)
	}
	// Moving the one edge by upsert keeps alice at one; an endpoint in the same batch is found.
	if _, err := load(t, g, "merge", `{"type":"Company","data":{"domain":"b.io","name":"B","size":"smb"}}`,
		`{"edge":"WorksAt","from":"alice","to":"b.io","data":{"id":"w1"}}`); err != nil {
		t.Fatal(err)
	}
	if after := tableVersions(t, g); after["edge:WorksAt"][0] != before["edge:WorksAt"][0]+1 {
		t.Fatalf("versions %v -> %v", before, after)
	}
}

func TestReceiptMakesRedeliveryANoOp(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	req := LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: &publisher.Receipt{Stream: "S", Sequence: 3, MsgID: "m-1"}}
	first, err := g.Load(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := g.Load(ctx, req) // an append of the same ids would be a KeyConflict if applied
	if err != nil || !again.AlreadyApplied || again.Commit.GraphCommitID != first.Commit.GraphCommitID {
		t.Fatalf("redelivery: %+v %v", again, err)
	}
	// A cold reader sees the receipt in the manifest.
	g2, _ := Open(ctx, g.root)
	st, _ := g2.Snapshot(ctx, "")
	if rc, ok, _ := st.Receipt(ctx, "m-1"); !ok || rc.GraphCommitID != first.Commit.GraphCommitID || rc.Sequence != 3 {
		t.Fatalf("receipt row %+v %v", rc, ok)
	}
}

func TestLimitsRefuseBeforeAnyWrite(t *testing.T) {
	g := testGraph(t)
	lines := make([]string, 8193)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"type":"Company","data":{"domain":"c%d.io","name":"C","size":"smb"}}`, i)
	}
	_, err := load(t, g, "append", lines...)
	var rl *errs.ResourceLimitExceeded
	if !errors.As(err, &rl) || rl.Resource != "keyed entities for node:Company" || rl.Limit != 8192 || rl.Actual != 8193 {
		t.Fatalf("limit: %v", err)
	}
	if _, err := load(t, g, "append", lines[:8192]...); err != nil {
		t.Fatalf("exactly the limit: %v", err)
	}
}

func TestExportInitLoadRoundTrip(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", append(people,
		`{"type":"Project","data":{"org":"acme","slug":"x","name":"X","status":"active","started_at":"2024-06-01T12:00:00Z","stars":5}}`,
		`{"type":"Doc","data":{"url":"https://d","title":"T","body":"B","embedding":[1,2,3,4,5,6,7,0.5]}}`,
		`{"edge":"Describes","from":"https://d","to":"[\"acme\",\"x\"]","data":{"id":"d1","relevance":0.25}}`,
		`{"edge":"Contributes","from":"bob","to":"[\"acme\",\"x\"]","data":{"id":"c1","commits":7}}`)...); err != nil {
		t.Fatal(err)
	}
	out := export(t, g, "")
	g2 := testGraph(t)
	recs, err := framing.ParseBytes([]byte(out), framing.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g2.Load(context.Background(), LoadRequest{Mode: ModeAppend, Records: recs}); err != nil {
		t.Fatal(err)
	}
	if out2 := export(t, g2, ""); out2 != out {
		t.Fatalf("round trip differs:\n%s\n---\n%s", out, out2)
	}
}

// A failure after the sidecar is durable returns RecoveryRequired and leaves the sidecar; the
// next write on the branch is refused until recovery resolves it.
func TestFailureAfterArmingLeavesSidecar(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_table_commit", "1*error"); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, g, "append", people...)
	var rr *errs.RecoveryRequired
	if !errors.As(err, &rr) || rr.OperationID == "" {
		t.Fatalf("after arming: %v", err)
	}
	l, _ := recovery.List(context.Background(), g.root)
	if len(l) != 1 || l[0].Name != rr.OperationID+".json" {
		t.Fatalf("sidecars %v", l)
	}
	_, err = load(t, g, "append", `{"type":"Person","data":{"handle":"x","name":"X","active":true}}`)
	if !errors.As(err, &rr) {
		t.Fatalf("write past a pending sidecar: %v", err)
	}
}

// A sidecar that cannot be written aborts the load with no table moved.
func TestSidecarWriteFailureAborts(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	before := tableVersions(t, g)
	_ = failpoint.Enable(recovery.FailpointWrite, "1*error")
	if _, err := load(t, g, "append", people...); !failpoint.IsInjected(err) {
		t.Fatalf("want the injected sidecar failure, got %v", err)
	}
	if after := tableVersions(t, g); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("tables moved: %v -> %v", before, after)
	}
	noSidecars(t, g)
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatalf("retry after the fault: %v", err)
	}
}

// A sidecar that cannot be deleted does not fail the write (Phase D is best effort).
func TestSidecarDeleteFailureStillSucceeds(t *testing.T) {
	g := testGraph(t)
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable(recovery.FailpointDelete, "1*error")
	if _, err := load(t, g, "append", people...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(export(t, g, ""), "alice") {
		t.Fatal("the write is not visible")
	}
}

// Overwrite does not reprepare past a moved head: another writer's commit between prepare and
// arming is a ReadSetChanged on graph_head:main.
func TestOverwriteRefusesMovedHead(t *testing.T) {
	ctx := context.Background()
	g := testGraph(t)
	other, err := Open(ctx, g.root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	_ = failpoint.Enable("load.after_prepare", "sleep(0)")
	p, err := g.prepare(ctx, &LoadRequest{Mode: ModeOverwrite, Records: records(t, people[2])}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Load(ctx, LoadRequest{Mode: ModeAppend, Records: records(t, people[0])}); err != nil {
		t.Fatal(err)
	}
	err = g.revalidate(ctx, &LoadRequest{Mode: ModeOverwrite}, p, false)
	var rsc *errs.ReadSetChanged
	if !errors.As(err, &rsc) || rsc.Member != "graph_head:main" {
		t.Fatalf("moved head: %v", err)
	}
}

func TestUniqueAgainstCommittedRows(t *testing.T) {
	g := testGraph(t)
	if _, err := load(t, g, "append", `{"type":"Person","data":{"handle":"a","name":"A","active":true,"email":"x@y"}}`); err != nil {
		t.Fatal(err)
	}
	_, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"b","name":"B","active":true,"email":"x@y"}}`)
	var ii *errs.InvalidInput
	if !errors.As(err, &ii) || !strings.Contains(err.Error(), "@unique violation on Person.email: value 'x@y' held by 'a' and 'b'") {
		t.Fatalf("committed unique: %v", err)
	}
	// Re-upserting an entity with its own value is fine; moving the value in the same batch too.
	if _, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"a","name":"A2","active":true,"email":"x@y"}}`); err != nil {
		t.Fatal(err)
	}
	if _, err := load(t, g, "merge", `{"type":"Person","data":{"handle":"a","name":"A","active":true,"email":"new@y"}}`,
		`{"type":"Person","data":{"handle":"b","name":"B","active":true,"email":"x@y"}}`); err != nil {
		t.Fatal(err)
	}
	// The index follows commits: x@y now belongs to b.
	_, err = load(t, g, "merge", `{"type":"Person","data":{"handle":"c","name":"C","active":true,"email":"x@y"}}`)
	if err == nil || !strings.Contains(err.Error(), "held by 'b' and 'c'") {
		t.Fatalf("after commits: %v", err)
	}
	// Edge @unique(src, dst) against committed edges.
	if _, err := load(t, g, "append", `{"type":"Project","data":{"org":"o","slug":"s","name":"P","status":"active","started_at":0}}`,
		`{"edge":"Contributes","from":"a","to":"[\"o\",\"s\"]","data":{"id":"c1"}}`); err != nil {
		t.Fatal(err)
	}
	_, err = load(t, g, "append", `{"edge":"Contributes","from":"a","to":"[\"o\",\"s\"]","data":{"id":"c2"}}`)
	if err == nil || !strings.Contains(err.Error(), "@unique violation on Contributes.(") || !strings.Contains(err.Error(), "held by 'c1' and 'c2'") {
		t.Fatalf("edge unique: %v", err)
	}
}
