package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/omnigraph/omnigraph-worker/engine/rows"
	"github.com/omnigraph/omnigraph-worker/lance"

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
	var loadErr error
	sets := func(key string) (map[string]bool, map[string]bool) {
		if w, ok := written[key]; ok {
			return w, deleted[key]
		}
		w, d := map[string]bool{}, map[string]bool{}
		if mt := byKey[key]; mt != nil {
			if err := mt.loadIDs(ctx); err != nil && loadErr == nil {
				loadErr = err
			}
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
		if byKey[key] != nil && byKey[key].writesRows() {
			w, d := sets(key)
			if loadErr != nil {
				return false, loadErr
			}
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
		_, ok := ts.ids.Get(id)
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
		ends, err := ts.endpoints(ctx)
		if err != nil {
			return nil, err
		}
		ends.each(func(id string, x edgeEnds) bool {
			if ew[id] || ed[id] {
				return true // the merge rewrites or deletes this edge; rewritten edges were checked above
			}
			if gone(e.From, x.src) || gone(e.To, x.dst) {
				orphan(e.Name, id, fmt.Sprintf("edge %s %q: an endpoint is deleted by the merge", e.Name, id))
			}
			return true
		})
	}
	return out, nil
}

// writesRows says the table's part of the merge is a chain this merge writes (its rows and
// deletes are in its chunks); pointer and ref-fork tables adopt a source version whole.
func (mt *mergeTable) writesRows() bool { return mt.route == RouteDiff || mt.route == RouteCertified }

// checkMergedCardinality recounts, for every edge table the merge writes, the out-degree of
// each source node it touches (including sources a rewritten edge moves away from) and checks
// the edge's @card bounds (cardinality_violation).
func (g *Graph) checkMergedCardinality(ctx context.Context, plan *mergePlan, tst *publisher.State) ([]errs.MergeConflict, error) {
	var out []errs.MergeConflict
	for _, mt := range plan.tables {
		e := mt.edge
		if e == nil || !mt.writesRows() || e.Card.Min == 0 && e.Card.Max == nil {
			continue
		}
		ts, err := g.openTable(ctx, mt.target, true)
		if err != nil {
			return nil, err
		}
		ends, err := ts.endpoints(ctx)
		if err != nil {
			return nil, err
		}
		deg := map[string]int{}
		at := func(src string) {
			if _, ok := deg[src]; !ok {
				deg[src] = ends.outDegree(src)
			}
		}
		for _, c := range mt.chunks {
			for _, id := range c.removedIDs {
				if old, ok := ends.srcOf(id); ok {
					at(old)
					deg[old]--
				}
			}
			for i, id := range c.ids {
				if old, ok := ends.srcOf(id); ok {
					at(old)
					deg[old]--
				}
				at(c.src[i])
				deg[c.src[i]]++
			}
		}
		for _, src := range sortedKeys(deg) {
			n := deg[src]
			var bound string
			switch {
			case e.Card.Max != nil && n > int(*e.Card.Max):
				bound = fmt.Sprintf("max %d", *e.Card.Max)
			case n < int(e.Card.Min):
				bound = fmt.Sprintf("min %d", e.Card.Min)
			default:
				continue
			}
			src := src
			out = append(out, errs.MergeConflict{EntityKind: "edge", TypeName: e.Name, EntityID: &src, Kind: "cardinality_violation",
				Message: fmt.Sprintf("@card violation on edge %s: source '%s' has %d edges after the merge (%s)", e.Name, src, n, bound)})
		}
	}
	return out, nil
}

// checkMergedUnique checks every @unique group (other than a node's @key, which is the id)
// over the merged rows: a tuple the merge writes may not be held by another entity that
// survives the merge, nor written twice (unique_violation).
func (g *Graph) checkMergedUnique(ctx context.Context, plan *mergePlan, tst *publisher.State) ([]errs.MergeConflict, error) {
	var out []errs.MergeConflict
	for _, mt := range plan.tables {
		if !mt.writesRows() {
			continue
		}
		probe := &rows.TableBatch{TableKey: mt.key, Node: mt.node, Edge: mt.edge}
		groups := probe.CommittedUniqueGroups()
		if len(groups) == 0 {
			continue
		}
		ts, err := g.openTable(ctx, mt.target, mt.isEdge)
		if err != nil {
			return nil, err
		}
		kind, typeName, _ := strings.Cut(mt.key, ":")
		for _, cols := range groups {
			ix, err := ts.uniqueIndex(ctx, mt.key, cols)
			if err != nil {
				return nil, err
			}
			written, err := mt.writtenTuples(ctx, probe, cols)
			if err != nil {
				return nil, err
			}
			deleted := map[string]bool{}
			for _, c := range mt.chunks {
				for _, id := range c.removedIDs {
					deleted[id] = true
				}
			}
			rewritten := make(map[string]bool, len(written))
			for _, w := range written {
				rewritten[w.id] = true
			}
			byTuple := map[string]string{}
			for _, w := range written {
				if w.tuple == nil {
					continue
				}
				tid := rows.TupleID(w.tuple)
				holder, held := ix.byTuple[tid]
				if other, dup := byTuple[tid]; dup {
					holder, held = other, true
				} else if held {
					if rewritten[holder] || deleted[holder] || holder == w.id {
						held = false // the holder does not survive with this tuple
					}
				}
				byTuple[tid] = w.id
				if held && holder != w.id {
					id := w.id
					out = append(out, errs.MergeConflict{EntityKind: kind, TypeName: typeName, EntityID: &id, Kind: "unique_violation",
						Message: rows.UniqueViolation(typeName, cols, w.tuple, holder, w.id)})
				}
			}
		}
	}
	return out, nil
}

type writtenTuple struct {
	id    string
	tuple []string
}

// writtenTuples are the (id, tuple) pairs of every row the merge writes: from the chunks'
// records, or for copied fragments, read from the source's files.
func (mt *mergeTable) writtenTuples(ctx context.Context, probe *rows.TableBatch, cols []string) ([]writtenTuple, error) {
	var out []writtenTuple
	add := func(rec arrow.Record) error {
		b := *probe
		b.Record = rec
		tuples, err := b.Tuples(cols)
		if err != nil {
			return err
		}
		idc := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.String)
		for i, t := range tuples {
			out = append(out, writtenTuple{id: idc.Value(i), tuple: t})
		}
		return nil
	}
	for _, c := range mt.chunks {
		for _, rec := range c.recs {
			if err := add(rec); err != nil {
				return nil, err
			}
		}
		if c.adopt != nil {
			recs, err := mt.sds.ReadAll(ctx, lance.ScanOptions{Columns: append([]string{"id"}, cols...), Fragments: c.adopt})
			if err != nil {
				return nil, err
			}
			for _, rec := range recs {
				if err := add(rec); err != nil {
					return nil, err
				}
				rec.Release()
			}
		}
	}
	return out, nil
}
