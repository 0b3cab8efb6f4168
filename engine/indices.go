package engine

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance"
)

// The indices the reference OmniGraph keeps on every table with rows, of those this build can
// make: a BTREE on id for node tables, and on id, src and dst for edge tables. They are built
// by maintenance (Optimize, and the worker's automatic compaction beside the messages), never
// inline by a load, each as one CreateIndex committed under the Optimize intent, so recovery
// handles them as it handles a compaction. Indices another writer built are carried through
// every commit (docs/lance-indices.md).

// btreeColumns are the columns of a table that want a BTREE.
func btreeColumns(isEdge bool) []string {
	if isEdge {
		return []string{"id", "src", "dst"}
	}
	return []string{"id"}
}

// missingBTrees are the columns of a table with rows whose BTREE is missing, or lags the data
// (fold 0: never refolded) by fold fragments or by more than a fold-th of the rows it covers:
// those are built (again) over the whole table, which replaces the old index of the name.
// Lance's own optimize_indices folds new rows into a scalar index the same way, rewriting it
// whole. Compaction merges unindexed fragments, so the fragment count alone would let a large
// unindexed fragment grow; the share of rows bounds the lag at a fold-th of the table, and
// each row is rewritten into the index about fold times over the table's life.
func missingBTrees(ds *lance.Dataset, isEdge bool, fold int) []string {
	if ds.CountRows() == 0 {
		return nil
	}
	var out []string
	for _, c := range btreeColumns(isEdge) {
		if ds.Schema().Field(c) == nil {
			continue
		}
		x := ds.BTree(c)
		if x == nil {
			out = append(out, c)
			continue
		}
		rows, frags := ds.Uncovered(x)
		if fold > 0 && rows > 0 && (frags >= fold || rows*uint64(fold) > ds.CountRows()-rows) {
			out = append(out, c)
		}
	}
	return out
}

// IndicesDue says, from what this writer already holds (no I/O), whether some main table with
// rows lacks one of its indices, or has one lagging by fold fragments (fanoutOrDefault).
func (g *Graph) IndicesDue(fold int) bool {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	fold = fanoutOrDefault(fold)
	for ref, ts := range g.tables {
		if ref.branch == "" && len(missingBTrees(ts.ds, ts.isEdge, fold)) > 0 {
			return true
		}
	}
	return false
}

// UnindexedRows is, for every main table this writer holds, the most live rows one of its
// indices does not cover (lance.Dataset.UnindexedRows), by table key.
func (g *Graph) UnindexedRows() map[string]uint64 {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	keys := map[string]string{}
	for _, t := range allTables(g.contract.Catalog) {
		keys[t.path] = t.key
	}
	out := map[string]uint64{}
	for ref, ts := range g.tables {
		if k, ok := keys[ref.path]; ok && ref.branch == "" {
			out[k] = ts.ds.UnindexedRows()
		}
	}
	return out
}

// stageIndexBuild stages the CreateIndex of the indices a table lacks, or nil when it lacks
// none.
func stageIndexBuild(ctx context.Context, key string, ts *tableState, fold int) (*lance.Staged, []string, error) {
	cols := missingBTrees(ts.ds, ts.isEdge, fanoutOrDefault(fold))
	if len(cols) == 0 {
		return nil, nil, nil
	}
	staged, err := ts.ds.StageBTreeIndices(ctx, cols, lance.IndexOptions{Stage: lance.StageOptions{InlineTransactionOnly: true}})
	if err != nil {
		return nil, nil, fmt.Errorf("stage the indices of %s: %w", key, err)
	}
	return staged, cols, nil
}
