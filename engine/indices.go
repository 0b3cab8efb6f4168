package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// The indices the reference OmniGraph keeps on every table with rows: on a node table a
// BTREE on id, and for each single-column @index property that is not a list an INVERTED
// (full-text) index on a free-text String, an IVF_FLAT (one partition, L2) on a Vector, and a
// BTREE on any other scalar (an enum, a number, a date; not a Blob); on an edge table BTREEs
// on id, src and dst. They are built by maintenance (Optimize, and the worker's automatic
// compaction beside the messages), never inline by a load, which is also how the reference
// now keeps them (its loads leave declared indices to its optimize reconciler): the indices a
// table lacks go into one CreateIndex committed under the Optimize intent, so recovery
// handles them as it handles a compaction. Indices another writer built are carried through
// every commit (docs/lance-indices.md).

// indexSpecs are the indices a table wants, by the reference's rule above.
func indexSpecs(t catalogTable) []lance.IndexSpec {
	if t.edge != nil {
		return []lance.IndexSpec{{Column: "id", Kind: lance.IndexBTree}, {Column: "src", Kind: lance.IndexBTree}, {Column: "dst", Kind: lance.IndexBTree}}
	}
	out := []lance.IndexSpec{{Column: "id", Kind: lance.IndexBTree}}
	if t.node == nil {
		return out
	}
	seen := map[string]bool{"id": true}
	for _, cols := range t.table.Indexes {
		if len(cols) != 1 || seen[cols[0]] {
			continue
		}
		p := t.table.Property(cols[0])
		if p == nil || p.Type.List {
			continue
		}
		seen[cols[0]] = true
		switch {
		case p.Type.IsVector():
			out = append(out, lance.IndexSpec{Column: p.Name, Kind: lance.IndexIVFFlat})
		case p.Type.Scalar == pg.String && !p.Type.IsEnum():
			out = append(out, lance.IndexSpec{Column: p.Name, Kind: lance.IndexInverted})
		case p.Type.IsBlob():
			// no index, as the reference
		default:
			out = append(out, lance.IndexSpec{Column: p.Name, Kind: lance.IndexBTree})
		}
	}
	return out
}

// indexSpecsOf are the wanted indices of the table at path under the accepted schema.
func (g *Graph) indexSpecsOf(path string) []lance.IndexSpec {
	for _, t := range allTables(g.Catalog()) {
		if t.path == path {
			return indexSpecs(t)
		}
	}
	return nil
}

// indexLagShare is how far an index may lag: it is folded once the rows it does not cover
// exceed 1/indexLagShare of those it does (half of the table at 1). A BTREE fold rewrites the
// whole index (lance's StageIndices merges its entries with the new rows, as Lance's own
// optimize_indices does), so folding each time the table grew by that share rewrites each
// entry about indexLagShare+1 times over the table's life: linear in the rows, as a growing
// array is, where folding every fanout fragments was quadratic (a 500k-row table rewritten
// every 16 batches; index upkeep cost as much as the writes). At 2 (a third of the table
// unindexed at most) the upkeep of a table growing to 500k rows took 0.79 of the rate without
// indices (engine BenchmarkMaintainedLoadsIndicesOn, median of five); at 1 it took 0.94: a
// query scans up to half the table beside the index, once in a doubling, for about a third
// less rewriting. The unindexed fragments stay few without a rule of their own: compaction
// merges them.
const indexLagShare = 1

// missingIndices are the wanted indices of a table with rows that are missing, or lag the
// data by more than its indexLagShare (fold 0: never refolded): lance's StageIndices builds
// the missing ones and folds the lagging ones, each replacing the old index of its name.
// A vector index is never refolded: the manifest does not say whether one is an IVF_FLAT or
// an IVF_PQ another writer chose, and the engines search the vectors it does not cover by
// brute force, exactly. An INVERTED index is refolded only under its default name. A spec
// that could not be built at this size (pending) waits for the table to grow.
func (g *Graph) missingIndices(path string, ds *lance.Dataset, fold int) []lance.IndexSpec {
	if ds.CountRows() == 0 {
		return nil
	}
	var out []lance.IndexSpec
	for _, s := range g.indexSpecsOf(path) {
		if ds.Schema().Field(s.Column) == nil || g.indexPending(path, s, ds.CountRows()) {
			continue
		}
		x := ds.Find(s)
		if x == nil {
			out = append(out, s)
			continue
		}
		if s.Kind == lance.IndexIVFFlat || s.Kind == lance.IndexInverted && x.Name != s.Column+"_idx" {
			continue
		}
		rows, _ := ds.Uncovered(x)
		if fold > 0 && rows > 0 && rows*indexLagShare > ds.CountRows()-rows {
			out = append(out, s)
		}
	}
	return out
}

// pendingIndex is a wanted index whose build failed at rows live rows (a column with no token
// or no usable vector yet).
type pendingIndex struct{ rows uint64 }

func pendingKey(path string, s lance.IndexSpec) string { return path + "\x00" + s.String() }

// indexPending says a spec's last build on the table failed and the table has not doubled
// since: building it again now would fail the same way, at the cost of reading the column.
func (g *Graph) indexPending(path string, s lance.IndexSpec, rows uint64) bool {
	v, ok := g.pendingIndices.Load(pendingKey(path, s))
	return ok && rows < 2*v.(pendingIndex).rows
}

// forgetIndex marks the default-named index of column on the table at path for removal by the
// next index maintenance: a schema apply dropped its @index. Only this process remembers it; a
// writer restarted before the maintenance ran keeps the index (it is still correct: every
// write carries it, and the engines read it).
func (g *Graph) forgetIndex(path, column string) {
	v, _ := g.unwantedIndices.LoadOrStore(path, &sync.Map{})
	v.(*sync.Map).Store(column, true)
}

// unwanted are the indices of ds the maintenance is to remove (forgetIndex) that it still has.
func (g *Graph) unwanted(path string, ds *lance.Dataset) []lance.Index {
	v, ok := g.unwantedIndices.Load(path)
	if !ok {
		return nil
	}
	wanted := map[string]bool{}
	for _, s := range g.indexSpecsOf(path) {
		wanted[s.Column] = true
	}
	var out []lance.Index
	v.(*sync.Map).Range(func(col, _ any) bool {
		i := slices.IndexFunc(ds.Indices(), func(x lance.Index) bool { return x.Name == col.(string)+"_idx" })
		if i < 0 || wanted[col.(string)] {
			v.(*sync.Map).Delete(col) // gone (or wanted again): nothing left to remove
			return true
		}
		out = append(out, ds.Indices()[i])
		return true
	})
	return out
}

// indexWorkFirst says whether the index work due on the table at path (indexWorkDue) goes
// before the table's due compaction run in a maintenance pass o. A table takes one transaction
// per commit, so a pass either rewrites the run or does the index work. The index work falls
// due once in a doubling of the table (a build, then a fold each time the lag passes its
// share), so a run waits at most one pass for it; a busy stream makes a run due after nearly
// every commit at a low fanout, and index work queued behind the runs waited for a lull that
// never came (on a loaded host, a table indexed only at 40 of its 48 rows and never folded).
// An explicit full compaction (OptimizeOptions.All) rewrites first, and so does a table whose
// last index work failed (a damaged index file, say, or a store refusing its writes): its runs
// keep being merged while its index work is tried again when none is due, as before. It does
// no I/O and reads no index: callers ask it before indexWorkDue.
func (g *Graph) indexWorkFirst(o OptimizeOptions, path string) bool {
	_, failed := g.indexWorkFailed.Load(path)
	return o.Indices && !o.All && !failed
}

// indexWorkBeforeRun says the table at path does its due index work in pass o and leaves its
// due compaction run for a later pass (indexWorkFirst, indexWorkDue at o's fanout).
// StageCompaction asks the two itself, as it needs indexWorkDue's answer on its own.
func (g *Graph) indexWorkBeforeRun(o OptimizeOptions, path string, ds *lance.Dataset) bool {
	return g.indexWorkFirst(o, path) && g.indexWorkDue(path, ds, fanoutOrDefault(o.Fanout))
}

// noteIndexWork records how the index work staged on the table at path ended (err, nil when
// it was staged and its files written), for indexWorkFirst. A cancelled one says nothing.
func (g *Graph) noteIndexWork(ctx context.Context, path string, err error) {
	switch {
	case err == nil:
		g.indexWorkFailed.Delete(path)
	case ctx.Err() == nil:
		g.indexWorkFailed.Store(path, true)
	}
}

// indexWorkDue says the table at path lacks a wanted index, has one lagging past its share,
// or still has one a schema apply dropped.
func (g *Graph) indexWorkDue(path string, ds *lance.Dataset, fold int) bool {
	return len(g.missingIndices(path, ds, fold)) > 0 || len(g.unwanted(path, ds)) > 0
}

// IndicesDue says, from what this writer already holds (no I/O), whether some main table with
// rows lacks one of its indices, or has one lagging by more than its indexLagShare (fold 0:
// missing ones only).
func (g *Graph) IndicesDue(fold int) bool {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	fold = fanoutOrDefault(fold)
	for ref, ts := range g.tables {
		if ref.branch == "" && g.indexWorkDue(ref.path, ts.ds, fold) {
			return true
		}
	}
	// An index a schema apply dropped, on a table this writer has not opened since.
	due := false
	g.unwantedIndices.Range(func(path, cols any) bool {
		_, open := g.tables[tableRef{path: path.(string)}]
		empty := true
		cols.(*sync.Map).Range(func(_, _ any) bool { empty = false; return false })
		due = !open && !empty
		return !due
	})
	return due
}

// UnindexedRows is, for every main table this writer holds, the most live rows one of its
// indices does not cover (lance.Dataset.UnindexedRows), by table key.
func (g *Graph) UnindexedRows() map[string]uint64 {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	keys := map[string]string{}
	for _, t := range allTables(g.Catalog()) {
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
// none; built names them as KIND(column). A wanted index that cannot be built yet (the
// reference's "pending": a string column with no token, a vector column with no usable
// vector) is left out and remembered until the table has doubled, and the rest are built.
// The indices are staged side by side, each holding one of slots (nil: one after another).
func (g *Graph) stageIndexBuild(ctx context.Context, key, path string, ds *lance.Dataset, fold int, slots *parallel.Slots) (staged *lance.Staged, built []string, err error) {
	// Indices a schema apply dropped go first, in a CreateIndex of their own; what is missing
	// is built at the next round.
	if gone := g.unwanted(path, ds); len(gone) > 0 {
		staged, err := ds.StageCreateIndex(nil, gone, lance.StageOptions{InlineTransactionOnly: true})
		if err != nil {
			return nil, nil, fmt.Errorf("stage the removal of the indices of %s: %w", key, err)
		}
		for _, x := range gone {
			built = append(built, "drop "+x.Name)
		}
		return staged, built, nil
	}
	specs := g.missingIndices(path, ds, fanoutOrDefault(fold))
	for len(specs) > 0 {
		staged, err = ds.StageIndices(ctx, specs, lance.StageOptions{InlineTransactionOnly: true, Slots: slots})
		var ie *lance.IndexError
		if err == nil || !errors.As(err, &ie) {
			break
		}
		i := slices.IndexFunc(specs, func(s lance.IndexSpec) bool { return ie.Index == s.Column+"_idx" })
		if i < 0 {
			break
		}
		g.pendingIndices.Store(pendingKey(path, specs[i]), pendingIndex{rows: ds.CountRows()})
		specs = slices.Delete(specs, i, i+1)
		staged, err = nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stage the indices of %s: %w", key, err)
	}
	for _, s := range specs {
		built = append(built, s.String())
	}
	return staged, built, nil
}
