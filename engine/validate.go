package engine

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// validateAgainstSnapshot runs the checks that need stored data, over the merged universe of
// the committed snapshot and this batch: the strict-insert preflight, edge endpoints, and
// edge cardinality. Like the batch checks, it reports the first violation.
func (g *Graph) validateAgainstSnapshot(ctx context.Context, req *LoadRequest, st *publisher.State, planned []*plannedTable) error {
	byKey := map[string]*plannedTable{}
	for _, t := range planned {
		byKey[t.key] = t
	}
	if req.Mode == ModeAppend {
		for _, t := range planned {
			if i := t.ts.ids.firstPresent(t.batch.IDs); i >= 0 {
				id := t.batch.IDs[i]
				return &errs.KeyConflict{TypeKey: t.key, EntityID: &id}
			}
		}
	}
	if req.Mode != ModeOverwrite {
		for _, t := range planned {
			if err := checkCommittedUnique(ctx, t); err != nil {
				return err
			}
		}
	}
	batchRows := map[string]map[string]int{} // table key -> batch id -> row, built once a table
	rowsOf := func(t *plannedTable) map[string]int {
		m, ok := batchRows[t.key]
		if !ok {
			m = t.batch.Rows()
			batchRows[t.key] = m
		}
		return m
	}
	// Endpoints resolve over the merged universe: an overwritten table is exactly its batch.
	// Each endpoint type is resolved once (its batch rows and committed index), not per edge.
	type endpointType struct {
		batch     map[string]int
		committed *idIndex // nil: the table is overwritten
	}
	resolved := map[string]*endpointType{}
	resolve := func(typeName string) (*endpointType, error) {
		if r := resolved[typeName]; r != nil {
			return r, nil
		}
		key := "node:" + typeName
		r := &endpointType{}
		t, planned := byKey[key]
		if planned {
			r.batch = rowsOf(t)
		}
		switch {
		case planned && req.Mode == ModeOverwrite:
		case planned:
			r.committed = t.ts.ids
		default:
			e, found := st.Table(key)
			if !found {
				return nil, fmt.Errorf("load: node table %s is not in the manifest", key)
			}
			ts, err := g.openTable(ctx, e, false)
			if err != nil {
				return nil, err
			}
			r.committed = ts.ids
		}
		resolved[typeName] = r
		return r, nil
	}
	nodeExists := func(typeName, id string) (bool, error) {
		r, err := resolve(typeName)
		if err != nil {
			return false, err
		}
		if _, ok := r.batch[id]; ok {
			return true, nil
		}
		_, ok := r.committed.Get(id)
		return ok, nil
	}
	for _, t := range planned {
		e := t.batch.Edge
		if e == nil {
			continue
		}
		for i := range t.batch.IDs {
			for _, end := range []struct{ name, typ, id string }{{"src", e.From, t.batch.Src[i]}, {"dst", e.To, t.batch.Dst[i]}} {
				ok, err := nodeExists(end.typ, end.id)
				if err != nil {
					return err
				}
				if !ok {
					return &errs.InvalidInput{Line: t.batch.Lines[i], Field: end.name,
						Reason: fmt.Sprintf("%s '%s' not found in %s", end.name, end.id, end.typ)}
				}
			}
		}
		if err := checkCardinality(ctx, t, req.Mode == ModeOverwrite); err != nil {
			return err
		}
	}
	if req.Mode == ModeOverwrite {
		for _, t := range planned {
			rowsOf(t)
		}
		if err := g.checkRetainedEdges(ctx, st, byKey, batchRows); err != nil {
			return err
		}
	}
	return nil
}

// checkCardinality recounts the out-degree of every source the batch touches (including
// sources an upsert moves an edge away from) and checks the edge's @card bounds.
func checkCardinality(ctx context.Context, t *plannedTable, overwrite bool) error {
	e := t.batch.Edge
	if e.Card.Min == 0 && e.Card.Max == nil {
		return nil
	}
	ends, err := t.ts.endpoints(ctx)
	if err != nil {
		return err
	}
	deg := map[string]int{}
	touched := map[string]bool{}
	base := func(src string) int {
		if overwrite {
			return 0
		}
		return ends.outDegree(src)
	}
	for i, id := range t.batch.IDs {
		src := t.batch.Src[i]
		if _, ok := deg[src]; !ok {
			deg[src] = base(src)
		}
		touched[src] = true
		if old, ok := ends.srcOf(id); ok && !overwrite {
			if _, seen := deg[old]; !seen {
				deg[old] = base(old)
			}
			deg[old]--
			touched[old] = true
		}
		deg[src]++
	}
	if overwrite {
		ends.eachSource(func(src string) {
			if _, ok := deg[src]; !ok {
				deg[src], touched[src] = 0, true
			}
		})
	}
	for src := range touched {
		n := deg[src]
		if e.Card.Max != nil && n > int(*e.Card.Max) {
			return &errs.InvalidInput{Field: "src", Reason: fmt.Sprintf("@card violation on edge %s: source '%s' has %d edges (max %d)", e.Name, src, n, *e.Card.Max)}
		}
		if n < int(e.Card.Min) {
			return &errs.InvalidInput{Field: "src", Reason: fmt.Sprintf("@card violation on edge %s: source '%s' has %d edges (min %d)", e.Name, src, n, e.Card.Min)}
		}
	}
	return nil
}

// checkRetainedEdges refuses an overwrite that removes nodes still referenced by edges the
// batch keeps (edge tables it does not overwrite).
func (g *Graph) checkRetainedEdges(ctx context.Context, st *publisher.State, byKey map[string]*plannedTable, batchIDs map[string]map[string]int) error {
	for _, e := range g.Catalog().Edges {
		if _, rewritten := byKey[e.TableKey()]; rewritten {
			continue
		}
		_, fromOver := byKey["node:"+e.From]
		_, toOver := byKey["node:"+e.To]
		if !fromOver && !toOver {
			continue
		}
		entry, ok := st.Table(e.TableKey())
		if !ok {
			continue
		}
		ts, err := g.openTable(ctx, entry, true)
		if err != nil {
			return err
		}
		ends, err := ts.endpoints(ctx)
		if err != nil {
			return err
		}
		var refused error
		ends.each(func(id string, x edgeEnds) bool {
			if _, kept := batchIDs["node:"+e.From][x.src]; fromOver && !kept {
				refused = &errs.InvalidInput{Field: "src", Reason: fmt.Sprintf("overwrite of %s removes node '%s' still referenced as src by edge %s '%s'", e.From, x.src, e.Name, id)}
			} else if _, kept := batchIDs["node:"+e.To][x.dst]; toOver && !kept {
				refused = &errs.InvalidInput{Field: "dst", Reason: fmt.Sprintf("overwrite of %s removes node '%s' still referenced as dst by edge %s '%s'", e.To, x.dst, e.Name, id)}
			}
			return refused == nil
		})
		if refused != nil {
			return refused
		}
	}
	return nil
}
