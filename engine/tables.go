package engine

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// tableState is what the single writer keeps per table between commits: a Lance handle at the
// published version and an index of live ids (with row addresses, and endpoints for edges), so
// the strict-insert preflight, reference checks and upserts never rescan the table.
type tableState struct {
	ds     *lance.Dataset
	ids    *idIndex
	ends   *endpoints // edges: built on first use (cardinality, overwrite and merge checks)
	isEdge bool
	unique map[string]*uniqueIndex // @unique groups checked against stored rows, built lazily
}

// endpoints returns the table's endpoint index, scanning src and dst once on first use.
func (ts *tableState) endpoints(ctx context.Context) (*endpoints, error) {
	if ts.ends != nil {
		return ts.ends, nil
	}
	e := newEndpoints()
	l := e.top
	err := ts.ds.Each(ctx, lance.ScanOptions{Columns: []string{"id", "src", "dst"}}, func(rec arrow.Record) error {
		idc, srcc, dstc := rec.Column(0).(*array.String), rec.Column(1).(*array.String), rec.Column(2).(*array.String)
		for i := 0; i < idc.Len(); i++ {
			s := srcc.Value(i)
			l.ends[idc.Value(i)] = edgeEnds{src: s, dst: dstc.Value(i)}
			l.deg[s]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ts.ends = e
	return e, nil
}

// openTable returns the state of a table at exactly its published version on its Lance branch,
// reusing the cached state when it is at that version.
func (g *Graph) openTable(ctx context.Context, e publisher.TableEntry, isEdge bool) (*tableState, error) {
	ts, opened, err := g.tableState(ctx, e, isEdge)
	if opened {
		g.tables[refOf(e)] = ts
	}
	return ts, err
}

// refOf is the cache key of a table entry.
func refOf(e publisher.TableEntry) tableRef {
	ref := tableRef{path: e.Path}
	if e.Branch != nil {
		ref.branch = *e.Branch
	}
	return ref
}

// tableState is openTable without caching what it opened (opened: the caller caches ts), so
// that several tables can be opened side by side; it only reads the cache.
func (g *Graph) tableState(ctx context.Context, e publisher.TableEntry, isEdge bool) (ts *tableState, opened bool, err error) {
	ref := refOf(e)
	if ts, ok := g.tables[ref]; ok && ts.ds.Version() == e.Version {
		return ts, false, nil
	}
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(ref.branch), lance.AtVersion(e.Version))
	if err != nil {
		return nil, false, fmt.Errorf("open table %s at version %d: %w", e.TableKey, e.Version, err)
	}
	if ts, err = indexTable(ctx, ds, isEdge); err != nil {
		return nil, false, fmt.Errorf("index table %s: %w", e.TableKey, err)
	}
	return ts, true, nil
}

// indexTable scans the id column once.
func indexTable(ctx context.Context, ds *lance.Dataset, isEdge bool) (*tableState, error) {
	ts := &tableState{ds: ds, ids: newIDIndex(int(ds.CountRows())), isEdge: isEdge}
	err := ds.Each(ctx, lance.ScanOptions{Columns: []string{"id"}, WithRowAddress: true}, func(rec arrow.Record) error {
		idc := rec.Column(0).(*array.String)
		addr := rec.Column(1).(*array.Uint64)
		ids := make([]string, idc.Len())
		addrs := make([]lance.RowAddress, idc.Len())
		for i := range ids {
			ids[i] = idc.Value(i) // SetMany copies the bytes into its arena
			addrs[i] = lance.RowAddress(addr.Value(i))
		}
		ts.ids.SetMany(ids, addrs)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ts, nil
}

// applyCommit folds a committed batch into the index: the rows of recIDs now live in the
// fragments the commit added, in order.
func (ts *tableState) applyCommit(ds *lance.Dataset, older *lance.Manifest, overwrite bool, rowIDs, src, dst []string) error {
	if err := ts.indexCommit(ds, older, overwrite, rowIDs, src, dst); err != nil {
		return err
	}
	ts.ds = ds
	return nil
}

// indexCommit is applyCommit without moving ts to ds: a load's fold may run beside the next
// write, which reads ts.ds (fold.go), so the load moves it itself.
func (ts *tableState) indexCommit(ds *lance.Dataset, older *lance.Manifest, overwrite bool, rowIDs, src, dst []string) error {
	if overwrite {
		ts.ids = newIDIndex(len(rowIDs))
		ts.ends = nil // rebuilt from the new version on next use
	}
	addrs := make([]lance.RowAddress, 0, len(rowIDs))
	for _, f := range ds.AddedFragments(older) {
		for i := uint64(0); i < f.PhysicalRows; i++ {
			addrs = append(addrs, lance.RowAddress(f.ID<<32|i))
		}
	}
	if len(addrs) != len(rowIDs) {
		return fmt.Errorf("commit added %d rows, the batch has %d", len(addrs), len(rowIDs))
	}
	if len(rowIDs) > ts.ids.Len() {
		// A commit larger than the index (a big merge into a small table): room once
		// instead of splitting its way there.
		ts.ids.Grow(len(rowIDs))
	}
	if ts.isEdge && ts.ends != nil {
		for i, id := range rowIDs {
			ts.ends.set(id, src[i], dst[i])
		}
	}
	ts.ids.SetMany(rowIDs, addrs)
	return nil
}

// forBranch is the index for a table's first write on a new branch: the fork starts as
// exactly the parent's rows, sharing the parent's id index and endpoints until either writes.
func (ts *tableState) forBranch() *tableState {
	return &tableState{ds: ts.ds, isEdge: ts.isEdge, ids: ts.ids.Clone(), ends: ts.ends.clone()}
}

// applyChain folds a merge's committed chain into the index: deleted ids leave, written rows
// live in the fragments the chain added, in chunk order.
func (ts *tableState) applyChain(t *mergeTable) error {
	var rowIDs, src, dst []string
	for _, c := range t.chunks {
		for _, id := range c.removedIDs {
			ts.forget(id)
		}
		rowIDs = append(rowIDs, c.ids...)
		src, dst = append(src, c.src...), append(dst, c.dst...)
	}
	ts.unique = nil // rebuilt from storage on next use
	return ts.applyCommit(t.committed, ts.ds.Manifest(), false, rowIDs, src, dst)
}

// forget drops an id from the index.
func (ts *tableState) forget(id string) {
	ts.ids.Delete(id)
	if ts.ends != nil {
		ts.ends.remove(id)
	}
}
