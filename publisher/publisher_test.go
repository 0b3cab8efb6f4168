package publisher

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/lance/file"
	"github.com/omnigraph/omnigraph-worker/lance/schema"
	"github.com/omnigraph/omnigraph-worker/storage"
)

var (
	person = ids.TableIdentity{StableTableID: 1, TableIncarnationID: 4}
	knows  = ids.TableIdentity{StableTableID: 2, TableIncarnationID: 5}
)

func genesis(t testing.TB) (storage.Store, string) {
	t.Helper()
	ctx := context.Background()
	root, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	commit := ids.NewULID()
	var regs []Registration
	var versions []DatasetUpdate
	for _, tb := range []struct {
		id  ids.TableIdentity
		key string
	}{{person, "node:Person"}, {knows, "edge:Knows"}} {
		regs = append(regs, Registration{Identity: tb.id, TableKey: tb.key})
		versions = append(versions, DatasetUpdate{Identity: tb.id, TableKey: tb.key, Version: 1, Meta: TableVersionMetadata{ManifestPath: "x"}})
	}
	if err := Create(ctx, root, regs, versions, Lineage{CommitID: commit, CreatedAt: 1}, file.Version{}); err != nil {
		t.Fatal(err)
	}
	return root, commit
}

func update(id ids.TableIdentity, key string, v, rows uint64) DatasetUpdate {
	return DatasetUpdate{Identity: id, TableKey: key, Version: v, RowCount: rows, Meta: TableVersionMetadata{ManifestPath: fmt.Sprint(v)}}
}

func TestGenesisSnapshot(t *testing.T) {
	root, commit := genesis(t)
	p := Open(root, "main")
	st, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tabs := st.Tables()
	if len(tabs) != 2 || tabs[0].TableKey != "edge:Knows" || tabs[1].TableKey != "node:Person" || tabs[1].Path != "nodes/0000000000000001-0000000000000004" {
		t.Fatalf("tables %+v", tabs)
	}
	if h, ok := st.Head("main"); !ok || h != commit || st.ManifestVersion != 1 || st.LineageHead().ID != commit {
		t.Fatalf("head %q %v", h, ok)
	}
}

func TestPublishWithExactHeadAndReceipt(t *testing.T) {
	ctx := context.Background()
	root, g := genesis(t)
	p := Open(root, "")
	c1 := ids.NewULID()
	res, err := p.Publish(ctx, Request{
		Updates:      []DatasetUpdate{update(person, "node:Person", 2, 10)},
		Expected:     map[ids.TableIdentity]Expectation{person: {"node:Person", 1}},
		Lineage:      &Lineage{CommitID: c1, ActorID: "alice", CreatedAt: 5},
		Precondition: &ExactHead{Identifier: lance.BranchIdentifier{}, Head: &g},
		Receipt:      &Receipt{Stream: "S", Sequence: 7, MsgID: "m-1", PayloadSHA256: "ab"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ManifestVersion != 2 || res.ParentCommitID != g {
		t.Fatalf("result %+v", res)
	}
	// A cold reader sees exactly what the writer folded in.
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*State{res.State, cold} {
		tb, _ := st.Table("node:Person")
		rc, ok, _ := st.Receipt(ctx, "m-1")
		if tb.Version != 2 || tb.RowCount != 10 || !ok || rc.GraphCommitID != c1 || rc.ManifestVersion != 2 || rc.Sequence != 7 {
			t.Fatalf("state: table %+v receipt %+v %v", tb, rc, ok)
		}
		c, _, _ := st.Commit(ctx, c1, 0)
		if h, _ := st.Head(""); h != c1 || c.Meta.ParentCommitID != g || c.Meta.ActorID != "alice" {
			t.Fatalf("lineage: head %s commit %+v", h, c)
		}
	}
	// The stale head is refused, typed, with both values.
	_, err = p.Publish(ctx, Request{Lineage: &Lineage{CommitID: ids.NewULID()}, Precondition: &ExactHead{Head: &g}})
	var rsc *errs.ReadSetChanged
	if !errors.As(err, &rsc) || rsc.Member != "graph_head:main" || *rsc.Expected != g || *rsc.Actual != c1 {
		t.Fatalf("stale head: %v", err)
	}
	// A stale table expectation is refused with the published version.
	_, err = p.Publish(ctx, Request{Updates: []DatasetUpdate{update(person, "node:Person", 3, 1)},
		Expected: map[ids.TableIdentity]Expectation{person: {"node:Person", 1}}, Lineage: &Lineage{CommitID: ids.NewULID()}})
	var pm *errs.PublishedDatasetVersionMismatch
	if !errors.As(err, &pm) || pm.ExpectedPublishedDatasetVersion != 1 || pm.ActualPublishedDatasetVersion != 2 {
		t.Fatalf("stale expectation: %v", err)
	}
	unknown := ids.TableIdentity{StableTableID: 9, TableIncarnationID: 9}
	_, err = p.Publish(ctx, Request{Expected: map[ids.TableIdentity]Expectation{unknown: {"node:X", 1}}, Lineage: &Lineage{CommitID: ids.NewULID()}})
	if !errors.As(err, &pm) || pm.ActualPublishedDatasetVersion != 0 {
		t.Fatalf("unknown identity: %v", err)
	}
}

func TestBranchHeadAbsentUntilFirstCommit(t *testing.T) {
	ctx := context.Background()
	root, g := genesis(t)
	main, _ := lance.Open(ctx, root.Sub(Dir))
	if _, err := main.CreateBranch(ctx, "feature"); err != nil {
		t.Fatal(err)
	}
	p := Open(root, "feature")
	st, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Head("feature"); ok {
		t.Fatal("fresh branch has a head row")
	}
	ident, _ := p.BranchIdentifier(ctx)
	// Expecting the inherited main head is a re-parent: refused.
	_, err = p.Publish(ctx, Request{Lineage: &Lineage{CommitID: ids.NewULID()}, Precondition: &ExactHead{Identifier: ident, Head: &g}})
	var rsc *errs.ReadSetChanged
	if !errors.As(err, &rsc) || rsc.Member != "graph_head:feature" || rsc.Actual != nil {
		t.Fatalf("reparent: %v", err)
	}
	c := ids.NewULID()
	if _, err := p.Publish(ctx, Request{Lineage: &Lineage{CommitID: c}, Precondition: &ExactHead{Identifier: ident}}); err != nil {
		t.Fatal(err)
	}
	// Delete and re-create the branch: the old identifier no longer holds (ABA fence).
	if err := lance.DeleteBranch(ctx, root.Sub(Dir), "feature"); err != nil {
		t.Fatal(err)
	}
	if _, err := main.CreateBranch(ctx, "feature"); err != nil {
		t.Fatal(err)
	}
	_, err = Open(root, "feature").Publish(ctx, Request{Lineage: &Lineage{CommitID: ids.NewULID()}, Precondition: &ExactHead{Identifier: ident}})
	if !errors.As(err, &rsc) || rsc.Member != "branch_identifier:feature" {
		t.Fatalf("ABA: %v", err)
	}
	mainState, _ := Open(root, "").Snapshot(ctx)
	if h, _ := mainState.Head(""); h != g {
		t.Fatal("branch commit moved main's head")
	}
}

// Disjoint writers racing on one branch serialize into one linear chain: each commit's parent
// is the commit before it, and every publish lands exactly once.
func TestConcurrentPublishersFormLinearChain(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := Open(root, "")
			for i := 0; i < each; i++ {
				if _, err := p.Publish(ctx, Request{Lineage: &Lineage{CommitID: ids.NewULID(), ActorID: fmt.Sprint(w)}}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if !strings.Contains(err.Error(), "exhausted") {
			t.Fatal(err)
		}
		t.Log("a writer exhausted its retry budget under heavy contention:", err)
	}
	st, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	assertLinear(t, st)
}

func assertLinear(t *testing.T, st *State) {
	t.Helper()
	// Compaction makes manifest versions without a commit, so order commits by version and
	// require each one's parent to be the commit before it.
	var cs []Commit
	seen := map[uint64]bool{}
	all, err := st.AllCommits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if seen[c.ManifestVersion] {
			t.Fatalf("two commits at manifest version %d", c.ManifestVersion)
		}
		seen[c.ManifestVersion] = true
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].ManifestVersion < cs[j].ManifestVersion })
	for i := 1; i < len(cs); i++ {
		if cs[i].Meta.ParentCommitID != cs[i-1].ID {
			t.Fatalf("commit at v%d has parent %s, want %s", cs[i].ManifestVersion, cs[i].Meta.ParentCommitID, cs[i-1].ID)
		}
	}
	if h, _ := st.Head(""); h != cs[len(cs)-1].ID {
		t.Fatal("head is not the last commit")
	}
}

func TestStampRefusals(t *testing.T) {
	ctx := context.Background()
	for _, stamp := range []string{"5", "7", "x", ""} {
		root, err := storage.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := ManifestSchema()
		sch, _ := schemaWithStamp(s, stamp)
		if _, err := lance.Create(ctx, root.Sub(Dir), sch, nil, lance.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err = Open(root, "").Snapshot(ctx)
		var se *StampError
		if !errors.As(err, &se) {
			t.Fatalf("stamp %q: %v", stamp, err)
		}
		want := map[string]string{"5": "rebuild", "7": "upgrade omnigraph-worker", "x": "unreadable", "": "missing"}[stamp]
		if !strings.Contains(se.Error(), want) {
			t.Fatalf("stamp %q: message %q lacks %q", stamp, se.Error(), want)
		}
		if errs.Kind(err) != errs.KindManifestStamp || !errs.NeedsOperator(err) {
			t.Fatalf("stamp %q: kind %q", stamp, errs.Kind(err))
		}
	}
}

// A __manifest whose rows do not fold (here a graph_head row without its metadata) is refused
// as corrupt, naming the row: the graph needs an operator.
func TestUnfoldableManifestIsCorrupt(t *testing.T) {
	ctx := context.Background()
	root, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := schema.FromArrow(ManifestSchema())
	if err != nil {
		t.Fatal(err)
	}
	rec := rowsRecord([]Row{{ObjectID: "graph_head:main", ObjectType: TypeGraphHead}})
	defer rec.Release()
	if _, err := lance.Create(ctx, root.Sub(Dir), s, []arrow.Record{rec}, lance.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(root, "").Snapshot(ctx)
	var me *ManifestError
	if !errors.As(err, &me) || me.ObjectID != "graph_head:main" || !strings.Contains(err.Error(), "graph_head without metadata") {
		t.Fatalf("snapshot of an unfoldable manifest: %v", err)
	}
	if errs.Kind(err) != errs.KindCorrupt || !errs.NeedsOperator(err) {
		t.Fatalf("kind %q", errs.Kind(err))
	}
}

// Compaction keeps the fragment count logarithmic, and upserts still find their rows after
// rows moved: a cold scan sees one head row pointing at the last commit.
func TestCompactionKeepsManifestSmallAndCorrect(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	var last string
	for i := 0; i < 300; i++ {
		last = ids.NewULID()
		if _, err := p.Publish(ctx, Request{Lineage: &Lineage{CommitID: last}, Receipt: &Receipt{MsgID: fmt.Sprint(i)},
			Updates: []DatasetUpdate{update(person, "node:Person", uint64(i+2), uint64(i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(p.Dataset().Manifest().Fragments); n > 2*CompactionFanout {
		t.Fatalf("%d fragments after 300 publishes", n)
	}
	ds, err := lance.Open(ctx, root.Sub(Dir))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ds.ReadAll(ctx, lance.ScanOptions{Columns: []string{"object_id", "object_type"}})
	if err != nil {
		t.Fatal(err)
	}
	heads := 0
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			if r.Column(1).(*array.String).Value(i) == TypeGraphHead {
				heads++
			}
		}
	}
	if heads != 1 {
		t.Fatalf("%d graph_head rows", heads)
	}
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs, _ := cold.AllCommits(ctx); len(cs) != 301 {
		t.Fatalf("%d commits", len(cs))
	}
	if h, _ := cold.Head(""); h != last {
		t.Fatalf("cold head %s (want %s)", h, last)
	}
	if rc, ok, _ := cold.Receipt(ctx, "299"); !ok || rc.GraphCommitID != last {
		t.Fatalf("receipt %+v %v", rc, ok)
	}
	tb, _ := cold.Table("node:Person")
	if tb.Version != 301 {
		t.Fatalf("table version %d", tb.Version)
	}
	assertLinear(t, cold)
}

// A tier merge the publishes do not make themselves (a cascade into a larger tier, after the
// publish, in a __manifest version of its own) moves the rows it merged, and the publisher's
// cached addresses follow them: the publishes after it replace exactly the rows they replace,
// and the state equals a full scan's.
func TestTailMergeAfterAPublishMovesTheAddresses(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	merged, last := -1, uint64(0)
	for i := 0; i < 2000 && (merged < 0 || i < merged+20); i++ {
		res, err := p.Publish(ctx, Request{Lineage: &Lineage{CommitID: ids.NewULID()}, Receipt: &Receipt{MsgID: fmt.Sprintf("m-%d", i)},
			Updates: []DatasetUpdate{update(person, "node:Person", uint64(i+2), uint64(i))}})
		if err != nil {
			t.Fatal(err)
		}
		if last != 0 && res.ManifestVersion > last+1 && merged < 0 {
			merged = i - 1 // a version between the last publish and this one: its merge
		}
		last = res.ManifestVersion
	}
	if merged < 0 {
		t.Fatal("no publish was followed by a merge of its own: the test sees nothing")
	}
	for oid, n := range objectRows(t, root) {
		if n != 1 {
			t.Fatalf("%d rows of %s after the merge at publish %d", n, oid, merged)
		}
	}
	st, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, st, fullScan(t, root, ""), merged+20)
}

// BeforeCommit runs once the attempt is staged and before anything is visible: its error ends
// the publish with the manifest as it was, and the next publish goes through.
func TestBeforeCommitGatesTheCommit(t *testing.T) {
	ctx := context.Background()
	root, g := genesis(t)
	p := Open(root, "")
	gateErr := errors.New("confirmation failed")
	calls := 0
	dataFiles := func() int {
		objs, err := root.List(ctx, "__manifest/data")
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	before := dataFiles()
	req := Request{
		Updates:  []DatasetUpdate{update(person, "node:Person", 2, 10)},
		Expected: map[ids.TableIdentity]Expectation{person: {"node:Person", 1}},
		Lineage:  &Lineage{CommitID: ids.NewULID(), CreatedAt: 5},
		BeforeCommit: func() error {
			calls++
			// The attempt's files are already written (they land while the caller works)...
			if dataFiles() != before+1 {
				t.Fatalf("%d __manifest data files inside BeforeCommit, want %d", dataFiles(), before+1)
			}
			// ...but nothing is visible yet, to this publisher or to a cold reader.
			for _, pub := range []*Publisher{p, Open(root, "")} {
				st, err := pub.Snapshot(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if st.ManifestVersion != 1 {
					t.Fatalf("manifest version %d inside BeforeCommit, want 1", st.ManifestVersion)
				}
			}
			return gateErr
		},
	}
	if _, err := p.Publish(ctx, req); !errors.Is(err, gateErr) || calls != 1 {
		t.Fatalf("Publish = %v after %d calls, want the gate's error after 1", err, calls)
	}
	st, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := st.Head("main"); st.ManifestVersion != 1 || h != g {
		t.Fatalf("a refused gate left manifest version %d, head %s", st.ManifestVersion, h)
	}
	req.BeforeCommit = func() error { calls++; return nil }
	res, err := p.Publish(ctx, req)
	if err != nil || res.ManifestVersion != 2 || calls != 2 {
		t.Fatalf("Publish after the gate opened = %+v, %v (%d calls)", res, err, calls)
	}
}

// objectRows counts the rows of each object id in the manifest's latest version.
func objectRows(t *testing.T, root storage.Store) map[string]int {
	t.Helper()
	ds, err := lance.Open(context.Background(), root.Sub("__manifest"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	err = ds.Each(context.Background(), lance.ScanOptions{Columns: []string{"object_id"}}, func(rec arrow.Record) error {
		oid := rec.Column(0).(*array.String)
		for i := 0; i < oid.Len(); i++ {
			out[oid.Value(i)]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The state keeps row addresses only for rows replaced in place (graph heads, registrations),
// not for the commits, receipts and table versions written once each. A row of those written
// again all the same (here a table version at the newest version) still replaces its old row,
// found by a scan, so the manifest never holds two rows of one object id; and the one-time rows
// of a long history hold no addresses, across tail compactions too.
func TestRowWrittenAgainReplacesItsOldRow(t *testing.T) {
	ctx := context.Background()
	root, _ := genesis(t)
	p := Open(root, "")
	for v := uint64(2); v < 40; v++ { // enough publishes for tail compactions
		if _, err := p.Publish(ctx, Request{Updates: []DatasetUpdate{update(person, "node:Person", v, v)},
			Lineage: &Lineage{CommitID: ids.NewULID()}, Receipt: &Receipt{Stream: "S", Sequence: v}}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for oid := range st.addr {
		if !strings.HasPrefix(oid, "graph_head:") && !strings.HasPrefix(oid, "table:") {
			t.Fatalf("the state keeps an address for %s", oid)
		}
	}
	if _, err := p.Publish(ctx, Request{Updates: []DatasetUpdate{update(person, "node:Person", 39, 1234)},
		Lineage: &Lineage{CommitID: ids.NewULID()}}); err != nil {
		t.Fatal(err)
	}
	for oid, n := range objectRows(t, root) {
		if n != 1 {
			t.Fatalf("%d rows of %s", n, oid)
		}
	}
	cold, err := Open(root, "").Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tb, _ := cold.Table("node:Person"); tb.Version != 39 || tb.RowCount != 1234 {
		t.Fatalf("the rewritten version reads %+v", tb)
	}
}
