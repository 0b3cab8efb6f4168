package engine

import (
	"context"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// tableState is what the single writer keeps per table between commits: a Lance handle at the
// published version and an index of live ids (with row addresses, and endpoints for edges), so
// the strict-insert preflight, reference checks and upserts never rescan the table.
type tableState struct {
	ds     *lance.Dataset
	ids    map[string]lance.RowAddress
	src    map[string]string // edges: id -> src
	dst    map[string]string // edges: id -> dst
	outDeg map[string]int    // edges: src -> live edge count
	isEdge bool
	unique map[string]*uniqueIndex // @unique groups checked against stored rows, built lazily
}

// openTable returns the state of a table at exactly its published version on its Lance branch,
// reusing the cached state when it is at that version.
func (g *Graph) openTable(ctx context.Context, e publisher.TableEntry, isEdge bool) (*tableState, error) {
	ref := tableRef{path: e.Path}
	if e.Branch != nil {
		ref.branch = *e.Branch
	}
	if ts, ok := g.tables[ref]; ok && ts.ds.Version() == e.Version {
		return ts, nil
	}
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(ref.branch), lance.AtVersion(e.Version))
	if err != nil {
		return nil, fmt.Errorf("open table %s at version %d: %w", e.TableKey, e.Version, err)
	}
	ts, err := indexTable(ctx, ds, isEdge)
	if err != nil {
		return nil, fmt.Errorf("index table %s: %w", e.TableKey, err)
	}
	g.tables[ref] = ts
	return ts, nil
}

// indexTable scans the id (and src, dst) columns once.
func indexTable(ctx context.Context, ds *lance.Dataset, isEdge bool) (*tableState, error) {
	ts := &tableState{ds: ds, ids: map[string]lance.RowAddress{}, isEdge: isEdge}
	cols := []string{"id"}
	if isEdge {
		cols = append(cols, "src", "dst")
		ts.src, ts.dst, ts.outDeg = map[string]string{}, map[string]string{}, map[string]int{}
	}
	sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: cols, WithRowAddress: true})
	if err != nil {
		return nil, err
	}
	for {
		rec, err := sc.Next(ctx)
		if err == io.EOF {
			return ts, nil
		}
		if err != nil {
			return nil, err
		}
		idc := rec.Column(0).(*array.String)
		addr := rec.Column(int(rec.NumCols()) - 1).(*array.Uint64)
		for i := 0; i < idc.Len(); i++ {
			id := idc.Value(i)
			ts.ids[id] = lance.RowAddress(addr.Value(i))
			if isEdge {
				s, d := rec.Column(1).(*array.String).Value(i), rec.Column(2).(*array.String).Value(i)
				ts.src[id], ts.dst[id] = s, d
				ts.outDeg[s]++
			}
		}
		rec.Release()
	}
}

// applyCommit folds a committed batch into the index: the rows of recIDs now live in the
// fragments the commit added, in order.
func (ts *tableState) applyCommit(ds *lance.Dataset, older *lance.Manifest, overwrite bool, rowIDs, src, dst []string) error {
	if overwrite {
		ts.ids = map[string]lance.RowAddress{}
		if ts.isEdge {
			ts.src, ts.dst, ts.outDeg = map[string]string{}, map[string]string{}, map[string]int{}
		}
	}
	var addrs []lance.RowAddress
	for _, f := range ds.AddedFragments(older) {
		for i := uint64(0); i < f.PhysicalRows; i++ {
			addrs = append(addrs, lance.RowAddress(f.ID<<32|i))
		}
	}
	if len(addrs) != len(rowIDs) {
		return fmt.Errorf("commit added %d rows, the batch has %d", len(addrs), len(rowIDs))
	}
	for i, id := range rowIDs {
		if ts.isEdge {
			if old, ok := ts.src[id]; ok {
				ts.outDeg[old]--
				if ts.outDeg[old] == 0 {
					delete(ts.outDeg, old)
				}
			}
			ts.src[id], ts.dst[id] = src[i], dst[i]
			ts.outDeg[src[i]]++
		}
		ts.ids[id] = addrs[i]
	}
	ts.ds = ds
	return nil
}

// forBranch copies the index for a table's first write on a new branch: the fork starts as
// exactly the parent's rows.
func (ts *tableState) forBranch() *tableState {
	c := &tableState{ds: ts.ds, isEdge: ts.isEdge, ids: make(map[string]lance.RowAddress, len(ts.ids))}
	for k, v := range ts.ids {
		c.ids[k] = v
	}
	if ts.isEdge {
		c.src, c.dst, c.outDeg = make(map[string]string, len(ts.src)), make(map[string]string, len(ts.dst)), make(map[string]int, len(ts.outDeg))
		for k, v := range ts.src {
			c.src[k] = v
		}
		for k, v := range ts.dst {
			c.dst[k] = v
		}
		for k, v := range ts.outDeg {
			c.outDeg[k] = v
		}
	}
	return c
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
	delete(ts.ids, id)
	if !ts.isEdge {
		return
	}
	if s, ok := ts.src[id]; ok {
		if ts.outDeg[s]--; ts.outDeg[s] <= 0 {
			delete(ts.outDeg, s)
		}
	}
	delete(ts.src, id)
	delete(ts.dst, id)
}
