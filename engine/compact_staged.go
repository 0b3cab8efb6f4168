package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// StagedCompaction is an automatic compaction whose rewritten files were written off the
// write gate (StageCompaction) while loads went on; CommitCompaction publishes it in the
// writer's turn. Dropping it leaves only unreferenced files, which cleanup's orphan sweep
// removes after OrphanGrace.
type StagedCompaction struct {
	o      OptimizeOptions
	tables []stagedRewrite
	at     time.Time
}

// stagedRewrite is one table's rewrite, staged at the version its cached state held.
type stagedRewrite struct {
	path    string
	staged  *lance.Staged
	c       *lance.Compaction // nil for an index build
	indices []string          // the columns an index build indexes
}

// stageConcurrency is how many rewrites and index builds StageCompaction runs at once, over
// all its tables: a table's rewrite holds one slot, and each index of its build one.
const stageConcurrency = 2

// stagedCompactionMaxAge bounds how long a staged compaction may wait for its commit: after
// OrphanGrace a cleanup may take its files for leftovers, so well before that it is dropped.
const stagedCompactionMaxAge = OrphanGrace / 2

// StageCompaction plans and writes, without holding the write gate while it reads and writes
// the rows, the rewrite of every main table whose run is due (compactionRun at o.Fanout), as
// the state this writer caches holds it: the gate is held only to take that state. Loads may
// commit meanwhile; CommitCompaction moves each rewrite past their appends. It returns nil
// when no table has a run due. The rewrite's files are unreferenced until it commits.
func (g *Graph) StageCompaction(ctx context.Context, o OptimizeOptions) (*StagedCompaction, error) {
	type due struct {
		path string
		run  []uint64
		ts   tableState // a copy of its dataset and kind: staging reads them off the gate
	}
	fanout := fanoutOrDefault(o.Fanout)
	var dues []due
	g.writeMu.Lock()
	for ref, ts := range g.tables {
		if ref.branch != "" {
			continue
		}
		run := compactionRun(ts.ds.Manifest(), fanout, o.MaxBytesPerFile)
		indices := o.Indices && g.indexWorkDue(ref.path, ts.ds, fanout)
		if indices && g.indexWorkFirst(o, ref.path) {
			run = nil
		}
		if run != nil || indices {
			dues = append(dues, due{path: ref.path, run: run, ts: tableState{ds: ts.ds, isEdge: ts.isEdge}})
		}
	}
	g.writeMu.Unlock()
	sort.Slice(dues, func(i, j int) bool { return dues[i].path < dues[j].path })
	sc := &StagedCompaction{o: o, at: time.Now()}
	// Rewrites and index builds run stageConcurrency at a time, over all the tables: a fold
	// rewrites each index whole, and the node and edge tables a batch writes fall due
	// together, an edge table with three BTREEs where its node table has one and an INVERTED
	// index. Building a table's indices side by side, not the tables, lets the two cores
	// share that work evenly. CompactionBytes counts the rewrites staged together.
	slots := parallel.NewSlots(stageConcurrency)
	staged := make([]*stagedRewrite, len(dues))
	at := parallel.Indices(len(dues))
	// Each table's staged files (rewritten fragments, index files: a fold writes its index
	// whole) are written as soon as it is staged, off the writer's turn, not by the commit in
	// it: nothing names them until a table commits, and those of a staging that is never
	// committed (stale, or the process gone) are unnamed files cleanup removes after its grace,
	// as an index build's under way. Their names are made durable by the commit, beside its
	// sidecar (lance.Staged.WriteAhead), one sync of each directory for all of them.
	write := func(t *stagedRewrite) error {
		if err := t.staged.WriteAhead(ctx); err != nil {
			return fmt.Errorf("write the staged files of %s: %w", t.path, err)
		}
		return nil
	}
	err := parallel.Each(at, len(at), func(i int) error {
		d := dues[i]
		if d.run != nil {
			co := lance.CompactionOptions{TargetRowsPerFragment: lanceTargetRows, MaxBytesPerFile: o.MaxBytesPerFile,
				Fragments: d.run, MaterializeDeletionsThreshold: -1}
			var s *lance.Staged
			var c *lance.Compaction
			err := slots.Do(ctx, func() (err error) {
				s, c, err = d.ts.ds.StageCompaction(ctx, co, lance.StageOptions{InlineTransactionOnly: true})
				return err
			})
			if err != nil {
				return fmt.Errorf("stage the compaction of %s: %w", d.path, err)
			}
			if s != nil {
				staged[i] = &stagedRewrite{path: d.path, staged: s, c: c}
				return write(staged[i])
			}
		}
		if !o.Indices {
			return nil
		}
		s, cols, err := g.stageIndexBuild(ctx, d.path, d.path, d.ts.ds, o.Fanout, slots)
		if err == nil && s != nil {
			staged[i] = &stagedRewrite{path: d.path, staged: s, indices: cols}
			err = write(staged[i])
		}
		g.noteIndexWork(ctx, d.path, err)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, t := range staged {
		if t != nil {
			sc.tables = append(sc.tables, *t)
		}
	}
	if len(sc.tables) == 0 {
		return nil, nil
	}
	if err := failpoint.Inject("compaction.after_stage"); err != nil {
		return nil, err
	}
	return sc, nil
}

// CommitCompaction publishes a staged compaction as Optimize publishes its own (the same v9
// Optimize intent and failpoints), after moving each table's rewrite onto the table's
// published version (lance.Staged.Rebase). A table whose rewritten fragments changed since
// staging (an upsert or merge deleted rows there), or that went, is left out and listed in
// OptimizeResult.Stale; when none is left, nothing is published and Commit is nil.
//
// Like a load, it first moves the rewrites onto the state this writer holds, with no storage
// request, and revalidates beside arming the sidecar (revalidateCompaction): the heal's
// listing, the schema, __manifest and the tables' HEADs in one round trip. A revalidation
// that fails takes the sidecar back; the commit then catches up and moves the rewrites onto
// what storage holds, as it did before, and arms after that check. So does a writer that
// left an intent for recovery or whose last write met a drift: it expects to heal or to be
// refused, and writes nothing first. A commit refused for drift marks the writer so, as a load
// does.
func (g *Graph) CommitCompaction(ctx context.Context, sc *StagedCompaction) (*OptimizeResult, error) {
	g.lockSettled()
	defer g.writeMu.Unlock()
	res, err := g.commitCompaction(ctx, sc)
	var drift *DriftError
	g.drifted.Store(errors.As(err, &drift))
	return res, err
}

func (g *Graph) commitCompaction(ctx context.Context, sc *StagedCompaction) (*OptimizeResult, error) {
	if held := g.publisher("").Cached(); held != nil && !g.revalidatesFirst() {
		plans, stale, err := g.rebaseCompaction(ctx, sc, held, nil)
		if err != nil {
			return nil, err
		}
		var checkErr error
		check := func(ctx context.Context) (*publisher.State, error) {
			st, err := g.revalidateCompaction(ctx, plans)
			checkErr = err
			return st, err
		}
		res, err := g.commitPlans(ctx, sc, plans, stale, held, check)
		if checkErr == nil || err != checkErr { // committed, or failed for another reason than the check
			return res, err
		}
	}
	if _, err := g.catchUp(ctx); err != nil {
		return nil, err
	}
	paths := make([]string, len(sc.tables))
	for i, t := range sc.tables {
		paths[i] = t.path
	}
	probes, waitProbes := g.probeHeads(ctx, paths)
	st, err := g.publisher("").Snapshot(ctx)
	waitProbes()
	if err != nil {
		return nil, err
	}
	plans, stale, err := g.rebaseCompaction(ctx, sc, st, probes)
	if err != nil {
		return nil, err
	}
	return g.commitPlans(ctx, sc, plans, stale, st, nil)
}

// commitPlans runs the intent of the plans a rebase made (none: nothing to publish).
func (g *Graph) commitPlans(ctx context.Context, sc *StagedCompaction, plans []*compactionPlan, stale []string, st *publisher.State,
	check func(context.Context) (*publisher.State, error)) (*OptimizeResult, error) {
	if len(plans) == 0 {
		return &OptimizeResult{Tables: []TableCompaction{}, Stale: stale}, nil
	}
	if err := failpoint.Inject("optimize.after_prepare"); err != nil {
		return nil, err
	}
	res, err := g.compact(ctx, sc.o, plans, st, check)
	if err != nil {
		return nil, err
	}
	res.Stale = stale
	return res, nil
}

// revalidateCompaction is the check of a compaction moved onto the held state: the deferred
// catch-up (caughtUp), and __manifest and every planned table's HEAD still at the versions
// the plans read. It returns the snapshot it read, for the publish to start from.
func (g *Graph) revalidateCompaction(ctx context.Context, plans []*compactionPlan) (*publisher.State, error) {
	var (
		barrier, snapErr error
		st               *publisher.State
		drift            = make([]error, len(plans))
		wg               sync.WaitGroup
	)
	wg.Go(func() { barrier = g.caughtUp(ctx) })
	wg.Go(func() { st, snapErr = g.publisher("").Snapshot(ctx) })
	for i, p := range plans {
		wg.Go(func() { drift[i] = checkNoDrift(ctx, p.ts.ds, p.entry) })
	}
	wg.Wait()
	if err := cmp.Or(barrier, snapErr); err != nil {
		return nil, err
	}
	for i, p := range plans {
		if err := cmp.Or(stillPublished(st, p.key, p.entry.Version), drift[i]); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// rebaseCompaction makes a plan of each staged rewrite whose table it can still move onto, on
// the snapshot st, and names the others. With probes (the HEADs read beside st) it refuses a
// drifted table; without, the revalidation checks the HEADs.
func (g *Graph) rebaseCompaction(ctx context.Context, sc *StagedCompaction, st *publisher.State, probes headProbes) (plans []*compactionPlan, stale []string, err error) {
	edges := map[string]bool{}
	for _, e := range g.Catalog().Edges {
		edges[e.TableKey()] = true
	}
	byPath := make(map[string]stagedRewrite, len(sc.tables))
	for _, t := range sc.tables {
		byPath[t.path] = t
	}
	expired := time.Since(sc.at) > stagedCompactionMaxAge
	for _, e := range st.Tables() {
		t, ok := byPath[e.Path]
		if !ok || e.Branch != nil {
			continue
		}
		delete(byPath, e.Path)
		if expired {
			stale = append(stale, e.TableKey)
			continue
		}
		ts, err := g.openTable(ctx, e, edges[e.TableKey])
		if err != nil {
			return nil, nil, err
		}
		if probes != nil {
			if err := probes.checkNoDrift(ctx, ts.ds, e); err != nil {
				return nil, nil, err
			}
		}
		var conflict *lance.RewriteConflictError
		switch err := t.staged.Rebase(ts.ds); {
		case errors.As(err, &conflict):
			stale = append(stale, e.TableKey)
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("move the compaction of %s onto version %d: %w", e.TableKey, e.Version, err)
		}
		plans = append(plans, &compactionPlan{key: e.TableKey, entry: e, ts: ts, staged: t.staged, c: t.c, indices: t.indices, before: ts.ds.NumFragments()})
	}
	for path := range byPath {
		stale = append(stale, path) // no longer a table of main
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].key < plans[j].key })
	sort.Strings(stale)
	return plans, stale, nil
}
