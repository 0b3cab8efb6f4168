package engine

import (
	"errors"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
)

// A load's fold: once its tables commit, the writer's id indexes (and edge endpoints, @unique
// groups) take in the rows it wrote, so that the next write checks keys without reading
// storage. The fold runs beside the publish, and an append or merge into tables the writer
// already held may still be folding when the load returns: its tables are installed at their
// committed versions at once, and their indexes are read only after settleFolds, which the
// next load's validation calls while that load encodes its files, and every other write calls
// when it takes the write gate. In a serving worker that takes the fold's tail off the commit
// loop's turn: it overlaps the acknowledgement and the next batch's encoding.
//
// Nothing outside this process reads these indexes, so a fold that never ends (the process
// dies) loses nothing; a fold that fails leaves its tables to be read from storage again.

// foldedTable is one table's index after a load's commit: ts folded at ds, or err.
type foldedTable struct {
	ref tableRef
	ts  *tableState
	ds  *lance.Dataset
	err error
}

// pendingFold is a load's fold: fts is set once done is closed.
type pendingFold struct {
	done chan struct{}
	fts  []foldedTable
}

// startFold folds what the load p committed into its tables' indexes, in the background, one
// table state each, side by side. Each table's pre-commit manifest is read here: the fold
// does not read ts.ds, which installFolded may move before it ends.
func (g *Graph) startFold(req *LoadRequest, p *prepared) *pendingFold {
	// p's validation settled the fold before this one; any write that did not validate first
	// would meet it here.
	_ = g.settleFolds()
	pf := &pendingFold{done: make(chan struct{}), fts: make([]foldedTable, len(p.tables))}
	olders := make([]*lance.Manifest, len(p.tables))
	for i, t := range p.tables {
		olders[i] = t.ts.ds.Manifest()
	}
	go func() {
		defer close(pf.done)
		at := parallel.Indices(len(p.tables))
		_ = parallel.Each(at, TableConcurrency, func(i int) error {
			pf.fts[i] = foldTable(req, p.tables[i], olders[i])
			return nil
		})
	}()
	return pf
}

// foldTable is one table's fold. A first write on a branch folds into a copy of the parent's
// state, which it must read whole: its fold is never left behind (foldsBehind).
func foldTable(req *LoadRequest, t *plannedTable, older *lance.Manifest) foldedTable {
	f := foldedTable{ref: t.ref(), ts: t.ts, ds: t.committed}
	if t.firstTouch {
		f.ts = f.ts.forBranch()
	}
	// A failpoint of its own: the fold may run after the load returned (tests slow it or
	// fail it there; the crash matrix kills a worker in it).
	if f.err = failpoint.Inject("load.fold"); f.err != nil {
		return f
	}
	overwrite := req.Mode == ModeOverwrite
	f.err = f.ts.indexCommit(t.committed, older, overwrite, t.batch.IDs, t.batch.Src, t.batch.Dst)
	if f.err == nil {
		f.err = f.ts.foldUnique(t.batch, overwrite)
	}
	return f
}

// foldsBehind says a published load's fold may end after the load returns: an append or a
// merge into table states this writer held. An overwrite replaces its tables' indexes, and a
// first write on a branch folds a new state; both are installed whole.
func foldsBehind(req *LoadRequest, p *prepared) bool {
	if req.Mode == ModeOverwrite {
		return false
	}
	for _, t := range p.tables {
		if t.firstTouch {
			return false
		}
	}
	return true
}

// installFolded caches the folded indexes of a published load: at once, behind the fold, when
// foldsBehind allows (settleFolds then waits for it), else once the fold has ended.
func (g *Graph) installFolded(pf *pendingFold, req *LoadRequest, p *prepared) {
	g.notePlans(req, p)
	if !foldsBehind(req, p) {
		<-pf.done
		for _, f := range pf.fts {
			if f.err != nil {
				delete(g.tables, f.ref) // rebuilt from storage on next use
				continue
			}
			f.ts.ds = f.ds
			g.tables[f.ref] = f.ts
		}
		return
	}
	for _, t := range p.tables {
		t.ts.ds = t.committed
		g.tables[t.ref()] = t.ts
	}
	g.folding = pf
}

// errFoldFailed says a load's fold failed after the load returned: the tables it folded were
// dropped from the cache, and whatever was prepared on them is prepared again.
var errFoldFailed = errors.New("engine: the previous load's id index fold failed; its tables are read again")

// settleFolds waits for the fold a load left behind, if any, and drops the tables whose fold
// failed (rebuilt from storage on next use): errFoldFailed then. The caller holds the write
// gate (or runs for its holder, as a load's validation does, while nothing else of that write
// touches the cache).
func (g *Graph) settleFolds() error {
	pf := g.folding
	if pf == nil {
		return nil
	}
	<-pf.done
	g.folding = nil
	var err error
	for _, f := range pf.fts {
		if f.err != nil {
			if g.tables[f.ref] == f.ts {
				delete(g.tables, f.ref)
			}
			err = errFoldFailed
		}
	}
	return err
}

// lockSettled takes the write gate for a write that reads the cached indexes or replaces the
// cache: the fold a load left behind has ended once it returns (a failed one only dropped its
// tables from the cache, which the write reads again).
func (g *Graph) lockSettled() {
	g.writeMu.Lock()
	_ = g.settleFolds()
}

// dropFolded forgets every index a load touched when its publish did not land: the cached
// states were folded ahead of a commit that is not visible.
func (g *Graph) dropFolded(fts []foldedTable) {
	for _, f := range fts {
		delete(g.tables, f.ref)
	}
}
