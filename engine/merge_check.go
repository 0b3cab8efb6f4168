package engine

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// checkMergedEdges is the merged-graph check that row merging alone cannot see: every edge the
// merge writes must end at nodes that exist after the merge, and no edge that survives the
// merge may end at a node the merge deletes (orphan_edge).
func (g *Graph) checkMergedEdges(ctx context.Context, plan *mergePlan, tst *publisher.State) ([]errs.MergeConflict, error) {
	byKey := map[string]*mergeTable{}
	written, deleted := map[string]map[string]bool{}, map[string]map[string]bool{}
	for _, mt := range plan.tables {
		byKey[mt.key] = mt
		w, d := map[string]bool{}, map[string]bool{}
		for _, c := range mt.chunks {
			for _, id := range c.ids {
				w[id] = true
			}
			for _, id := range c.removedIDs {
				d[id] = true
			}
		}
		written[mt.key], deleted[mt.key] = w, d
	}
	// index is a table's id index as the merge leaves it (before this merge's own chunks).
	index := func(key string, isEdge bool) (*tableState, error) {
		if mt := byKey[key]; mt != nil && (mt.route == RoutePointer || mt.route == RouteRefFork) {
			return g.openTable(ctx, mt.source, isEdge) // the target adopts the source's version
		}
		e, ok := tst.Table(key)
		if !ok {
			return nil, fmt.Errorf("merge: table %s is not in the target manifest", key)
		}
		return g.openTable(ctx, e, isEdge)
	}
	nodeAlive := func(typeName, id string) (bool, error) {
		key := "node:" + typeName
		if written[key][id] {
			return true, nil
		}
		if deleted[key][id] {
			return false, nil
		}
		ts, err := index(key, false)
		if err != nil {
			return false, err
		}
		_, ok := ts.ids[id]
		return ok, nil
	}
	var out []errs.MergeConflict
	orphan := func(e string, id, msg string) {
		id2 := id
		out = append(out, errs.MergeConflict{EntityKind: "edge", TypeName: e, EntityID: &id2, Kind: "orphan_edge", Message: msg})
	}
	for _, mt := range plan.tables {
		if mt.edge == nil {
			continue
		}
		for _, c := range mt.chunks {
			for i, id := range c.ids {
				for _, end := range [2][2]string{{mt.edge.From, c.src[i]}, {mt.edge.To, c.dst[i]}} {
					ok, err := nodeAlive(end[0], end[1])
					if err != nil {
						return nil, err
					}
					if !ok {
						orphan(mt.edge.Name, id, fmt.Sprintf("edge %s %q: endpoint %s %q does not exist after the merge", mt.edge.Name, id, end[0], end[1]))
					}
				}
			}
		}
	}
	for _, e := range g.Catalog().Edges {
		gone := func(typeName, id string) bool { return deleted["node:"+typeName][id] }
		if len(deleted["node:"+e.From]) == 0 && len(deleted["node:"+e.To]) == 0 {
			continue
		}
		key := e.TableKey()
		ts, err := index(key, true)
		if err != nil {
			return nil, err
		}
		for id, src := range ts.src {
			if written[key][id] || deleted[key][id] {
				continue // the merge rewrites or deletes this edge; rewritten edges were checked above
			}
			if gone(e.From, src) || gone(e.To, ts.dst[id]) {
				orphan(e.Name, id, fmt.Sprintf("edge %s %q: an endpoint is deleted by the merge", e.Name, id))
			}
		}
	}
	return out, nil
}
