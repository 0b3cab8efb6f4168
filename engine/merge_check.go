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
	for _, mt := range plan.tables {
		byKey[mt.key] = mt
	}
	// The id sets of what the merge writes and deletes, built only for the tables a check asks
	// about (a nodes-only merge never builds them).
	written, deleted := map[string]map[string]bool{}, map[string]map[string]bool{}
	sets := func(key string) (map[string]bool, map[string]bool) {
		if w, ok := written[key]; ok {
			return w, deleted[key]
		}
		w, d := map[string]bool{}, map[string]bool{}
		if mt := byKey[key]; mt != nil {
			for _, c := range mt.chunks {
				for _, id := range c.ids {
					w[id] = true
				}
				for _, id := range c.removedIDs {
					d[id] = true
				}
			}
		}
		written[key], deleted[key] = w, d
		return w, d
	}
	deletes := func(key string) bool {
		if mt := byKey[key]; mt != nil {
			return mt.stats.Deleted > 0
		}
		return false
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
		if byKey[key] != nil && (byKey[key].route == RouteDiff || byKey[key].route == RouteCertified) {
			w, d := sets(key)
			if w[id] {
				return true, nil
			}
			if d[id] {
				return false, nil
			}
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
		if !deletes("node:"+e.From) && !deletes("node:"+e.To) {
			continue
		}
		gone := func(typeName, id string) bool {
			_, d := sets("node:" + typeName)
			return d[id]
		}
		key := e.TableKey()
		ew, ed := sets(key)
		ts, err := index(key, true)
		if err != nil {
			return nil, err
		}
		for id, src := range ts.src {
			if ew[id] || ed[id] {
				continue // the merge rewrites or deletes this edge; rewritten edges were checked above
			}
			if gone(e.From, src) || gone(e.To, ts.dst[id]) {
				orphan(e.Name, id, fmt.Sprintf("edge %s %q: an endpoint is deleted by the merge", e.Name, id))
			}
		}
	}
	return out, nil
}
