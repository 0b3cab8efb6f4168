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

// missingBTrees are the columns of a table with rows that lack their BTREE.
func missingBTrees(ds *lance.Dataset, isEdge bool) []string {
	if ds.CountRows() == 0 {
		return nil
	}
	var out []string
	for _, c := range btreeColumns(isEdge) {
		if ds.Schema().Field(c) != nil && !ds.HasBTree(c) {
			out = append(out, c)
		}
	}
	return out
}

// IndicesDue says, from what this writer already holds (no I/O), whether some main table with
// rows lacks one of its indices.
func (g *Graph) IndicesDue() bool {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	for ref, ts := range g.tables {
		if ref.branch == "" && len(missingBTrees(ts.ds, ts.isEdge)) > 0 {
			return true
		}
	}
	return false
}

// stageIndexBuild stages the CreateIndex of the indices a table lacks, or nil when it lacks
// none.
func stageIndexBuild(ctx context.Context, key string, ts *tableState) (*lance.Staged, []string, error) {
	cols := missingBTrees(ts.ds, ts.isEdge)
	if len(cols) == 0 {
		return nil, nil, nil
	}
	staged, err := ts.ds.StageBTreeIndices(ctx, cols, lance.IndexOptions{Stage: lance.StageOptions{InlineTransactionOnly: true}})
	if err != nil {
		return nil, nil, fmt.Errorf("stage the indices of %s: %w", key, err)
	}
	return staged, cols, nil
}
