package engine

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// Merge chunk bounds: every keyed chunk holds at most this many rows and bytes.
const (
	MergeChunkRows  = 8192
	MergeChunkBytes = 32 << 20
)

// retainedLimit bounds the rows a merge holds in memory while it plans (the ordinary diff keeps
// both sides' changed rows): the reference's 32 MiB retained validation delta. A variable so
// tests can lower it.
var retainedLimit int64 = MergeChunkBytes

// retained charges what a merge plan holds against retainedLimit.
type retained struct{ bytes int64 }

func (r *retained) charge(recs []arrow.Record) error {
	for _, rec := range recs {
		r.bytes += rows.RecordBytes(rec)
	}
	if r.bytes > retainedLimit {
		return &errs.ResourceLimitExceeded{Resource: "branch-merge retained validation delta bytes", Limit: uint64(retainedLimit), Actual: uint64(r.bytes)}
	}
	return nil
}

// pureInsertHistoryMaxVersions bounds the certificate walk (PURE_INSERT_HISTORY_MAX_VERSIONS).
const pureInsertHistoryMaxVersions = 1024

// chunkRows is MergeChunkRows; tests lower it to exercise chains without millions of rows.
var chunkRows = MergeChunkRows

// mergePlan is a validated merge: what every touched table will do.
type mergePlan struct {
	tables []*mergeTable // sorted by key; only tables the merge changes
}

// mergeTable is one table's part of a merge.
type mergeTable struct {
	key    string
	isEdge bool
	edge   *pg.EdgeType
	node   *pg.NodeType
	target publisher.TableEntry // the target's pin
	source publisher.TableEntry
	route  string
	// firstTouch: the target branch does not own this table yet; a chain first forks the
	// target's ref at the inherited version.
	firstTouch bool
	tds        *lance.Dataset // the target table at its pin (chains), or the source table (ref fork)
	sds        *lance.Dataset // the source table (certified chunks copy its fragments' files)
	ts         *tableState    // the target's id index, when the route needed it
	chunks     []*mergeChunk
	uuids      []string
	stats      MergeTableStats
	committed  *lance.Dataset
	refID      lance.BranchIdentifier
	idsPending bool                      // certified chunks whose ids (and endpoints) are not read yet
	opened     map[string]*lance.Dataset // the table versions planning opened, by path@branch:version
}

// openSides opens base, source and target (mt.tds) for a table's diff.
func (mt *mergeTable) openSides(ctx context.Context, g *Graph, base publisher.TableEntry) (bds, sds, tds *lance.Dataset, err error) {
	if bds, err = mt.open(ctx, g, base); err != nil {
		return nil, nil, nil, err
	}
	if sds, err = mt.open(ctx, g, mt.source); err != nil {
		return nil, nil, nil, err
	}
	if tds, err = mt.open(ctx, g, mt.target); err != nil {
		return nil, nil, nil, err
	}
	mt.tds = tds
	return bds, sds, tds, nil
}

// open opens the table version e once for the whole planning of mt.
func (mt *mergeTable) open(ctx context.Context, g *Graph, e publisher.TableEntry) (*lance.Dataset, error) {
	key := fmt.Sprintf("%s@%s:%d", e.Path, derefOr(e.Branch), e.Version)
	if ds, ok := mt.opened[key]; ok {
		return ds, nil
	}
	ds, err := g.openAt(ctx, e)
	if err != nil {
		return nil, err
	}
	if mt.opened == nil {
		mt.opened = map[string]*lance.Dataset{}
	}
	mt.opened[key] = ds
	return ds, nil
}

func (t *mergeTable) physical() bool { return t.route != RoutePointer }

// mergeChunk is one data transaction of a table's chain.
type mergeChunk struct {
	remove     []lance.RowAddress // target rows replaced or deleted
	recs       []arrow.Record     // rows written (none for a delete-only chunk)
	ids        []string           // ids of the written rows, in order
	src, dst   []string           // edges: endpoints of the written rows
	removedIDs []string           // ids deleted outright
	insertOnly bool               // every row is proven absent from the target: certified
	adopt      []uint64           // source fragments whose files this chunk copies (certified route)
	staged     *lance.Staged      // adopt: copied and staged (at its planned read version) before the chain
}

// sideDelta is what one side changed since the base: rows it wrote (new or rewritten) and base
// ids it deleted without rewriting.
type sideDelta struct {
	recs      []arrow.Record
	written   map[string]rowRef
	rewritten map[string]bool // base ids this side rewrote (updates)
	deleted   map[string]bool
}

type rowRef struct{ rec, row int }

func (d *sideDelta) row(id string) ([]byte, error) {
	r := d.written[id]
	return rows.AppendRow(nil, d.recs[r.rec], r.row)
}

// planMerge compares base, source and target table by table, reports conflicts, checks the
// merged graph, and cuts every change into bounded chunks. Nothing is written.
func (g *Graph) planMerge(ctx context.Context, req *MergeRequest, bst, sst, tst *publisher.State) (*mergePlan, error) {
	plan := &mergePlan{}
	budget := &retained{}
	var conflicts []errs.MergeConflict
	// Tables are matched by identity: a schema apply on main since the source forked may have
	// renamed one (schema_branches.go).
	sIDs, tIDs, bIDs := byIdentity(sst), byIdentity(tst), byIdentity(bst)
	accepted := map[ids.TableIdentity]bool{}
	for _, ct := range allTables(g.Catalog()) {
		id := ids.TableIdentity{StableTableID: ct.table.TypeID, TableIncarnationID: ct.table.IncarnationID}
		accepted[id] = true
		s, sok := sIDs[id]
		t, tok := tIDs[id]
		b, bok := bIDs[id]
		switch {
		case !sok && !bok:
			continue // a type added since the source forked: the source did not change it
		case !sok || !tok || !bok:
			return nil, fmt.Errorf("merge: table %s is missing from a branch manifest", ct.key)
		}
		if samePointer(s, b) || samePointer(s, t) {
			continue // the source did not change it, or the target already has the source's version
		}
		mt := &mergeTable{key: ct.key, isEdge: ct.edge != nil, edge: ct.edge, node: ct.node, target: t, source: s,
			firstTouch: req.Target != "" && derefOr(t.Branch) != req.Target}
		mt.stats.TableKey = ct.key
		c, err := g.planSchemaChecked(ctx, req, mt, b, ct, budget)
		if err != nil {
			return nil, err
		}
		conflicts = append(conflicts, c...)
		mt.stats.Route = mt.route
		if mt.writesRows() && len(mt.chunks) == 0 {
			continue // both sides made the same changes: the target already holds the result
		}
		plan.tables = append(plan.tables, mt)
	}
	// A table the source changed that the accepted schema dropped has nowhere to go.
	for id, s := range sIDs {
		if b, ok := bIDs[id]; !accepted[id] && (!ok || !samePointer(s, b)) {
			conflicts = append(conflicts, schemaConflict(s.TableKey, "changed on the source, but the accepted schema no longer has this type"))
		}
	}
	for _, check := range []func(context.Context, *mergePlan, *publisher.State) ([]errs.MergeConflict, error){
		g.checkMergedEdges, g.checkMergedCardinality, g.checkMergedUnique} {
		if len(conflicts) > 0 {
			break
		}
		var err error
		if conflicts, err = check(ctx, plan, tst); err != nil {
			return nil, err
		}
	}
	if len(conflicts) > 0 {
		return nil, &errs.MergeConflicts{Source: ids.BranchKey(req.Source), Target: ids.BranchKey(req.Target), Conflicts: conflicts}
	}
	return plan, nil
}

// planSchemaChecked plans a table as planTable does when both sides have the accepted
// schema's columns for it; a target that does not is refused, a source that does not goes
// through planStaleSource.
func (g *Graph) planSchemaChecked(ctx context.Context, req *MergeRequest, mt *mergeTable, base publisher.TableEntry, ct catalogTable, budget *retained) ([]errs.MergeConflict, error) {
	want := ct.table.Arrow
	if mt.target.TableKey != ct.key {
		return []errs.MergeConflict{schemaConflict(ct.key, "the target predates the accepted schema (it has this type as %s)", mt.target.TableKey)}, nil
	}
	tds, err := mt.open(ctx, g, mt.target)
	if err != nil {
		return nil, err
	}
	if d, err := columnsAgainst(tds, want); err != nil {
		return nil, err
	} else if !d.same() {
		return []errs.MergeConflict{schemaConflict(ct.key, "the target predates the accepted schema: %s", d)}, nil
	}
	sds, err := mt.open(ctx, g, mt.source)
	if err != nil {
		return nil, err
	}
	d, err := columnsAgainst(sds, want)
	if err != nil {
		return nil, err
	}
	if !d.same() {
		return g.planStaleSource(ctx, mt, base, want, d, budget)
	}
	return g.planTable(ctx, req, mt, base, budget)
}

// planTable picks the table's route and builds its chunks.
func (g *Graph) planTable(ctx context.Context, req *MergeRequest, mt *mergeTable, base publisher.TableEntry, budget *retained) ([]errs.MergeConflict, error) {
	targetUnchanged := samePointer(mt.target, base)
	if mt.firstTouch && targetUnchanged {
		switch {
		case derefOr(mt.source.Branch) != req.Source:
			// The source inherited this version from another branch: the target adopts the pointer.
			mt.route = RoutePointer
			return nil, nil
		case !req.DeleteSource:
			// The target's first touch: a ref on the source's version, no data copied. (With
			// DeleteSource the source's files go away, so the rows are written instead.)
			sds, err := mt.open(ctx, g, mt.source)
			if err != nil {
				return nil, err
			}
			mt.route, mt.tds = RouteRefFork, sds
			return nil, nil
		}
	}
	bds, sds, tds, err := mt.openSides(ctx, g, base)
	if err != nil {
		return nil, err
	}
	// A target that only compacted since base holds base's rows: the certified route stands,
	// and its diff would be empty.
	targetSameRows := targetUnchanged || !mt.firstTouch && onlyRewritesSince(ctx, tds, bds)
	if targetSameRows && !mt.firstTouch && !req.NoCertifiedRoute {
		frags, ok := provenInserts(ctx, bds, sds, base)
		if ok {
			mt.route = RouteCertified
			if adopted, err := mt.planAdopt(ctx, sds, frags); adopted || err != nil {
				return nil, err
			}
			recs, err := readAll(ctx, sds, lance.ScanOptions{Fragments: frags})
			if err != nil {
				return nil, err
			}
			if err := budget.charge(recs); err != nil {
				return nil, err
			}
			var writes []writeItem
			for ri, rec := range recs {
				idc := rec.Column(0).(*array.String)
				for i := 0; i < idc.Len(); i++ {
					writes = append(writes, writeItem{rowRef: rowRef{ri, i}, id: idc.Value(i)})
				}
			}
			mt.stats.Inserted = len(writes)
			return nil, mt.cut(recs, writes, nil)
		}
	}
	mt.route = RouteDiff
	sd, err := diffSide(ctx, bds, sds)
	if err != nil {
		return nil, err
	}
	if err := budget.charge(sd.recs); err != nil {
		return nil, err
	}
	td := &sideDelta{written: map[string]rowRef{}, rewritten: map[string]bool{}, deleted: map[string]bool{}}
	if !targetSameRows {
		if td, err = diffSide(ctx, bds, tds); err != nil {
			return nil, err
		}
		if err := budget.charge(td.recs); err != nil {
			return nil, err
		}
	}
	if mt.ts, err = g.openTable(ctx, mt.target, mt.isEdge); err != nil {
		return nil, err
	}
	return mt.reconcile(sd, td)
}

// provenInserts is the certified-insert proof: the source table descends from the base
// version on the same branch or on a ref forked at exactly it, and every transaction since is a
// certified insert. It returns the fragments those transactions added.
func provenInserts(ctx context.Context, bds, sds *lance.Dataset, base publisher.TableEntry) ([]uint64, bool) {
	from := base.Version
	if sds.Branch() != bds.Branch() && !sds.ForkedAt(ctx, bds.Branch(), from) {
		return nil, false
	}
	if sds.Version() < from || sds.Version()-from > pureInsertHistoryMaxVersions {
		return nil, false // beyond the bounded history walk: the ordinary diff decides
	}
	for v := from + 1; v <= sds.Version(); v++ {
		if err := sds.InsertOnlyCertified(ctx, v); err != nil {
			return nil, false
		}
	}
	// Insert-only history removes nothing: the new fragments are exactly the inserted rows
	// (fragment ids are assigned at commit, so they are read from the manifests).
	diff, err := sds.DiffFrom(ctx, bds)
	if err != nil || len(diff.Removed) > 0 {
		return nil, false
	}
	return diff.NewFragments, true
}

// onlyRewritesSince says whether every version of the table after base's up to tds's, on the
// same Lance branch, is a Rewrite (a compaction: rows moved, none changed). The walk is bounded
// like the certified-insert proof's; beyond it the answer is no and the ordinary diff decides.
func onlyRewritesSince(ctx context.Context, tds, bds *lance.Dataset) bool {
	if tds.Branch() != bds.Branch() || tds.Version() <= bds.Version() || tds.Version()-bds.Version() > pureInsertHistoryMaxVersions {
		return false
	}
	for v := bds.Version() + 1; v <= tds.Version(); v++ {
		t, err := tds.ReadTransaction(ctx, v)
		if err != nil || t.Op.Kind != lance.OpRewrite || t.ReadVersion+1 != v {
			return false
		}
	}
	return true
}

// diffSide reads what a side changed since base.
func diffSide(ctx context.Context, bds, side *lance.Dataset) (*sideDelta, error) {
	d := &sideDelta{written: map[string]rowRef{}, rewritten: map[string]bool{}, deleted: map[string]bool{}}
	diff, err := side.DiffFrom(ctx, bds)
	if err != nil {
		return nil, err
	}
	if len(diff.NewFragments) > 0 {
		if d.recs, err = readAll(ctx, side, lance.ScanOptions{Fragments: diff.NewFragments}); err != nil {
			return nil, err
		}
	}
	if len(diff.NewRows) > 0 {
		// Rows written since base that a compaction put beside rows it only moved.
		mixed, err := readAll(ctx, side, lance.ScanOptions{Rows: diff.NewRows})
		if err != nil {
			for _, r := range d.recs {
				r.Release()
			}
			return nil, err
		}
		d.recs = append(d.recs, mixed...)
	}
	if len(d.recs) > 0 {
		for ri, rec := range d.recs {
			idc := rec.Column(0).(*array.String)
			for i := 0; i < idc.Len(); i++ {
				d.written[idc.Value(i)] = rowRef{ri, i}
			}
		}
	}
	if len(diff.Removed) > 0 {
		removed := map[lance.RowAddress]bool{}
		fragSet := map[uint64]bool{}
		for _, a := range diff.Removed {
			removed[a] = true
			fragSet[a.Fragment()] = true
		}
		frags := make([]uint64, 0, len(fragSet))
		for f := range fragSet {
			frags = append(frags, f)
		}
		err := bds.Each(ctx, lance.ScanOptions{Columns: []string{"id"}, WithRowAddress: true, Fragments: frags}, func(rec arrow.Record) error {
			idc, addr := rec.Column(0).(*array.String), rec.Column(1).(*array.Uint64)
			for i := 0; i < idc.Len(); i++ {
				if !removed[lance.RowAddress(addr.Value(i))] {
					continue
				}
				if id := idc.Value(i); hasRow(d, id) {
					d.rewritten[id] = true
				} else {
					d.deleted[id] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

func hasRow(d *sideDelta, id string) bool {
	_, ok := d.written[id]
	return ok
}

func readAll(ctx context.Context, ds *lance.Dataset, opts lance.ScanOptions) ([]arrow.Record, error) {
	opts.BatchRows = chunkRows
	return ds.ReadAll(ctx, opts)
}

// reconcile applies the per-id three-way rule: a change on one side only is taken; equal
// changes on both sides agree; anything else is a conflict.
func (mt *mergeTable) reconcile(sd, td *sideDelta) ([]errs.MergeConflict, error) {
	var conflicts []errs.MergeConflict
	conflict := func(id, kind string) {
		id2 := id
		kindName, typeName, _ := strings.Cut(mt.key, ":")
		conflicts = append(conflicts, errs.MergeConflict{EntityKind: kindName, TypeName: typeName, EntityID: &id2, Kind: kind,
			Message: fmt.Sprintf("%s %s %q: %s", kindName, typeName, id, strings.ReplaceAll(kind, "_", " "))})
	}
	var writes []writeItem
	for _, id := range sortedKeys(sd.written) {
		r := sd.written[id]
		inBase := sd.rewritten[id]
		switch {
		case hasRow(td, id):
			mine, err := sd.row(id)
			if err != nil {
				return nil, err
			}
			theirs, err := td.row(id)
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(mine, theirs) {
				if inBase || td.rewritten[id] {
					conflict(id, "divergent_update")
				} else {
					conflict(id, "divergent_insert")
				}
			}
			continue
		case td.deleted[id]:
			conflict(id, "delete_vs_update")
			continue
		}
		addr, exists := mt.ts.ids.Get(id)
		switch {
		case inBase && exists:
			writes = append(writes, writeItem{rowRef: r, id: id, addr: addr, update: true})
			mt.stats.Updated++
		case exists: // new on the source, yet the target holds the id outside its own delta
			conflict(id, "divergent_insert")
		default:
			writes = append(writes, writeItem{rowRef: r, id: id})
			mt.stats.Inserted++
		}
	}
	var deletes []deleteItem
	for _, id := range sortedKeys(sd.deleted) {
		switch {
		case hasRow(td, id):
			conflict(id, "delete_vs_update")
		case td.deleted[id]:
		default:
			if addr, ok := mt.ts.ids.Get(id); ok {
				deletes = append(deletes, deleteItem{id: id, addr: addr})
				mt.stats.Deleted++
			}
		}
	}
	if len(conflicts) > 0 {
		return conflicts, nil
	}
	sortWrites(writes)
	return nil, mt.cut(sd.recs, writes, deletes)
}

// sortWrites puts writes in the physical order of their rows within the source's files.
func sortWrites(writes []writeItem) {
	sort.Slice(writes, func(i, j int) bool {
		if writes[i].rec != writes[j].rec {
			return writes[i].rec < writes[j].rec
		}
		return writes[i].row < writes[j].row
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// planAdopt is the certified route's fast path: each source fragment the proof covers becomes
// one chunk that copies its files as they are (they already hold at most a keyed batch), so no
// row is decoded or re-encoded. Only the id (and endpoint) columns are read, for the indexes
// and the merged-graph checks. It declines (false) when a fragment is over the chunk bounds.
func (mt *mergeTable) planAdopt(ctx context.Context, sds *lance.Dataset, frags []uint64) (bool, error) {
	want := map[uint64]bool{}
	for _, id := range frags {
		want[id] = true
	}
	byID := map[uint64]*mergeChunk{}
	for _, f := range sds.Manifest().Fragments {
		if !want[f.ID] {
			continue
		}
		var size uint64
		for _, df := range f.Files {
			size += df.FileSizeBytes
		}
		if f.Deletion != nil || f.PhysicalRows > uint64(chunkRows) || size > MergeChunkBytes {
			return false, nil
		}
		byID[f.ID] = &mergeChunk{adopt: []uint64{f.ID}, insertOnly: true}
	}
	mt.sds = sds
	for _, id := range frags {
		mt.chunks = append(mt.chunks, byID[id])
	}
	var rows uint64
	for _, f := range sds.Manifest().Fragments {
		if want[f.ID] {
			rows += f.PhysicalRows
		}
	}
	mt.stats.Inserted = int(rows)
	// Edges always need their endpoints (the merged-graph checks); a node table's ids are read
	// only if something asks for them (a check, or folding into a cached index).
	mt.idsPending = true
	if mt.isEdge {
		if err := mt.loadIDs(ctx); err != nil {
			return false, err
		}
	}
	mt.stats.Transactions = len(mt.chunks)
	if len(mt.chunks) > recovery.MaxMergeChain {
		return false, &errs.ResourceLimitExceeded{Resource: "branch-merge recovery transactions for " + mt.key,
			Limit: recovery.MaxMergeChain, Actual: uint64(len(mt.chunks))}
	}
	return true, nil
}

// loadIDs reads the ids (and, for edges, the endpoints) of the rows the certified chunks copy,
// once, from the source's files: only the id and endpoint columns are decoded.
func (mt *mergeTable) loadIDs(ctx context.Context) error {
	if !mt.idsPending {
		return nil
	}
	byID := map[uint64]*mergeChunk{}
	var frags []uint64
	for _, c := range mt.chunks {
		for _, f := range c.adopt {
			byID[f] = c
			frags = append(frags, f)
		}
	}
	cols := []string{"id"}
	if mt.isEdge {
		cols = append(cols, "src", "dst")
	}
	err := mt.sds.Each(ctx, lance.ScanOptions{Columns: cols, WithRowAddress: true, Fragments: frags, BatchRows: chunkRows}, func(rec arrow.Record) error {
		idc := rec.Column(0).(*array.String)
		addr := rec.Column(int(rec.NumCols()) - 1).(*array.Uint64)
		for i := 0; i < idc.Len(); i++ {
			c := byID[lance.RowAddress(addr.Value(i)).Fragment()]
			c.ids = append(c.ids, idc.Value(i))
			if mt.isEdge {
				c.src = append(c.src, rec.Column(1).(*array.String).Value(i))
				c.dst = append(c.dst, rec.Column(2).(*array.String).Value(i))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	mt.idsPending = false
	return nil
}
