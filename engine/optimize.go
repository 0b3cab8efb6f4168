package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// DefaultCompactionFanout is the size-tier fanout of automatic compaction: once the newest
// fragments of a table hold this many of one size tier, they (and any smaller ones newer than
// them) are merged into one (tierRun). A table then
// keeps about fanout × log_fanout(rows) fragments however many loads it took, and each row is
// rewritten about log_fanout(rows) times in its life.
const DefaultCompactionFanout = 16

// OptimizeOptions choose what an Optimize compacts.
type OptimizeOptions struct {
	// Fanout is the size-tier fanout (0: DefaultCompactionFanout): the newest fragments are
	// merged once one size tier among them holds Fanout fragments (tierRun); otherwise the
	// oldest fragment with more than a tenth of its rows deleted is rewritten alone.
	Fanout int
	// All compacts every fragment Lance's own planner would (small or with many deletions),
	// the whole table at once: an operator's full optimize. It ignores Fanout.
	All bool
	// Actor is recorded on the graph commit.
	Actor string
	// MaxBytesPerFile cuts rewritten data files by size (0: lance.DefaultMaxBytesPerFile), which
	// bounds a compaction's memory on tables of wide rows (embeddings); fragments holding half
	// as much are not merged again.
	MaxBytesPerFile uint64
	// Indices also builds the indices the reference OmniGraph keeps (indices.go: BTREEs,
	// INVERTED and IVF_FLAT) on every main table with rows that lacks one, or whose index lags
	// by a compaction tier, and is not compacted in the same commit.
	Indices bool
}

// TableCompaction is what an Optimize did to one table.
type TableCompaction struct {
	TableKey         string `json:"table_key"`
	FromVersion      uint64 `json:"from_version"`
	ToVersion        uint64 `json:"to_version"`
	FragmentsBefore  int    `json:"fragments_before"`
	FragmentsRemoved int    `json:"fragments_removed"`
	FragmentsAdded   int    `json:"fragments_added"`
	RowsRewritten    uint64 `json:"rows_rewritten"`
	// IndicesBuilt names the indices this commit built, as KIND(column) (the table was not
	// compacted in the same commit: one transaction per table).
	IndicesBuilt []string `json:"indices_built,omitempty"`
}

// OptimizeResult is what an Optimize published: nothing (no table needed compacting) or one
// main commit moving every compacted table's pointer.
type OptimizeResult struct {
	Tables []TableCompaction `json:"tables"`
	Commit *CommitInfo       `json:"commit,omitempty"`
	// Stale names the tables whose staged rewrite (StageCompaction) was dropped because the
	// table changed under it; their next compaction stages it again.
	Stale []string `json:"stale,omitempty"`
}

// compactionPlan is one table's staged rewrite.
type compactionPlan struct {
	key       string
	entry     publisher.TableEntry
	ts        *tableState
	staged    *lance.Staged
	c         *lance.Compaction // nil for an index build
	indices   []string          // the columns an index build indexes
	before    int
	prepared  *lance.PreparedCommit
	committed *lance.Dataset // the version the commit makes, known once prepared
}

// CompactionDue says, from what this writer already holds (no I/O), whether some main table
// has a run to compact (compactionRun). A writer asks after each commit; Optimize itself
// decides again from storage.
func (g *Graph) CompactionDue(fanout int) bool {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	fanout = fanoutOrDefault(fanout)
	for ref, ts := range g.tables {
		if ref.branch == "" && len(compactionRun(ts.ds.Manifest(), fanout, 0)) > 0 {
			return true
		}
	}
	return false
}

// CompactionBytes is about how much memory staging the due compactions (StageCompaction with
// o) holds at its peak, from what this writer already holds (no I/O): the tables are
// rewritten up to stageConcurrency at a time, each holding up to one output file
// (o.MaxBytesPerFile, 0: the default) of rows read and the file encoded from them. A table
// whose index work goes first (o.Indices) has its run left for a later pass and counts
// nothing. A worker counts it against its bound on what is in flight, so that the messages it
// prefetches leave room for it.
func (g *Graph) CompactionBytes(o OptimizeOptions) int64 {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	fanout := fanoutOrDefault(o.Fanout)
	maxBytes := o.MaxBytesPerFile
	if maxBytes == 0 {
		maxBytes = lance.DefaultMaxBytesPerFile
	}
	var peaks []uint64
	for ref, ts := range g.tables {
		if ref.branch != "" {
			continue
		}
		frags := ts.ds.Manifest().Fragments
		run := compactionRun(ts.ds.Manifest(), fanout, maxBytes)
		if run == nil || g.indexWorkBeforeRun(o, ref.path, ts.ds) {
			continue
		}
		in := map[uint64]bool{}
		for _, id := range run {
			in[id] = true
		}
		var bytes uint64
		for i := range frags {
			if in[frags[i].ID] {
				n, ok := frags[i].FileBytes()
				if !ok {
					n = maxBytes // unrecorded: take the most a file holds
				}
				bytes += n
			}
		}
		peaks = append(peaks, 2*min(bytes, maxBytes))
	}
	// stageConcurrency tables are staged at once: the largest of them together.
	slices.SortFunc(peaks, func(a, b uint64) int { return cmp.Compare(b, a) })
	var peak uint64
	for _, p := range peaks[:min(len(peaks), stageConcurrency)] {
		peak += p
	}
	return int64(min(peak, math.MaxInt64))
}

// compactionRun is what an automatic compaction of a table rewrites: a full tier run (below),
// else the oldest fragment with more than a tenth of its rows, and at least
// deletionRewriteMinRows rows, deleted, alone. Upserts leave deletion
// vectors in fragments of every age, and a tier run only ever holds the newest ones, so
// without the second rule the rows an upsert replaced in an old fragment would be read and
// masked by every scan for good.
//
// Tiers are counted within each run of fragments the same indices cover
// (lance.Manifest.CoverageRunStart), the newest run first: a rewrite may not mix fragments an
// index covers with others, so a tier run across the boundary was cut in two, each part merged
// short of the next tier and merged again with the next ones (a stream of 4,096-row batches
// with its indices folded rewrote half as many rows again as without indices). The covered
// fragments just before the boundary wait for the next fold, which moves it past them, or for
// a full tier of their own.
func compactionRun(m *lance.Manifest, fanout int, maxBytes uint64) []uint64 {
	frags := m.Fragments
	for end := len(frags); end > 0; {
		start := m.CoverageRunStart(end)
		if run := tierRun(frags[start:end], fanout, maxBytes); run != nil {
			return run
		}
		end = start
	}
	for i := range frags {
		// NumDeletedRows 0 with a deletion file means "not recorded" (only other writers):
		// judging it would need the file, and this check must stay free of I/O.
		if d := frags[i].Deletion; d != nil && d.NumDeletedRows*10 > frags[i].PhysicalRows && d.NumDeletedRows >= deletionRewriteMinRows {
			return []uint64{frags[i].ID}
		}
	}
	return nil
}

// deletionRewriteMinRows is the fewest deleted rows for which a fragment is rewritten for its
// deletions alone. Each rewrite is a graph commit of its own, while a masked row costs a scan
// next to nothing: with a tenth alone, a stream upserting small batches made every fragment
// it merged due again after two or three messages, and `make soak` (100-row upserts) ran more
// compactions than messages. So a fragment masks at most the larger of this many rows and a
// tenth of its own; one whose every row is deleted is dropped by the delete itself.
const deletionRewriteMinRows = 1024

func fanoutOrDefault(f int) int {
	if f < 2 {
		return DefaultCompactionFanout
	}
	return f
}

// tierRun returns the ids of the newest fragments to merge, or nil. A fragment's tier is k for
// live rows in [fanout^k, fanout^(k+1)). For the smallest tier T at which the newest fragments
// of tier T or below include fanout of tier T itself, those newest fragments are the run: a
// tier merges once it holds fanout fragments, as in a size-tiered LSM, taking along the
// smaller ones newer than them, so a mix of sizes (a small load after every big one) still
// merges, while a few small fragments never drag larger ones into a rewrite before their own
// tier is full. Fragments of more than half the target size, in rows or in bytes (maxBytes,
// 0: lance's default), end runs: two of them cannot share a rewritten fragment.
func tierRun(frags []lance.Fragment, fanout int, maxBytes uint64) []uint64 {
	const full = lanceTargetRows / 2
	var tiers []int // of the newest fragments, newest first, up to the first full one
	top := 0
	for i := len(frags) - 1; i >= 0; i-- {
		n := frags[i].NumRows()
		if n > full || frags[i].FullBySize(maxBytes) {
			break
		}
		t := 0
		for n >= uint64(fanout) {
			n /= uint64(fanout)
			t++
		}
		tiers = append(tiers, t)
		top = max(top, t)
	}
	if len(tiers) < fanout {
		return nil
	}
	for tier := 0; tier <= top; tier++ {
		n, same := 0, 0
		for ; n < len(tiers) && tiers[n] <= tier; n++ {
			if tiers[n] == tier {
				same++
			}
		}
		if same >= fanout {
			out := make([]uint64, 0, n)
			for _, f := range frags[len(frags)-n:] {
				out = append(out, f.ID)
			}
			return out
		}
	}
	return nil
}

// lanceTargetRows is Lance's target_rows_per_fragment, the size rewritten fragments are cut at.
const lanceTargetRows = 1 << 20

// Optimize compacts main's tables as one maintenance write: plan and stage a Lance Rewrite per
// table that needs one, arm the v9 Optimize sidecar, commit each rewrite exactly at its pin + 1,
// publish every new pointer in one main commit, retire the sidecar. A Rewrite moves rows
// between fragments and changes none, so readers see the same graph before and after, and
// recovery keeps whatever landed (it never restores). Errors before arming leave at most
// unreferenced files; any error after is *errs.RecoveryRequired with the sidecar in place.
func (g *Graph) Optimize(ctx context.Context, o OptimizeOptions) (*OptimizeResult, error) {
	release, err := g.enter(ctx, "")
	if err != nil {
		return nil, err
	}
	defer release()
	plans, st, err := g.planCompactions(ctx, o)
	if err != nil || len(plans) == 0 {
		return &OptimizeResult{Tables: []TableCompaction{}}, err
	}
	if err := failpoint.Inject("optimize.after_prepare"); err != nil {
		return nil, err
	}
	return g.compact(ctx, o, plans, st, nil)
}

// planCompactions stages a rewrite for every main table that needs one, on the snapshot st it
// reads beside the HEADs of the tables the writer holds.
func (g *Graph) planCompactions(ctx context.Context, o OptimizeOptions) (plans []*compactionPlan, st *publisher.State, err error) {
	var held []string
	for ref := range g.tables {
		if ref.branch == "" {
			held = append(held, ref.path)
		}
	}
	probes, waitProbes := g.probeHeads(ctx, held)
	st, err = g.publisher("").Snapshot(ctx)
	waitProbes()
	if err != nil {
		return nil, nil, err
	}
	edges := map[string]bool{}
	for _, e := range g.Catalog().Edges {
		edges[e.TableKey()] = true
	}
	slots := parallel.NewSlots(stageConcurrency) // the index builds of one table at a time
	for _, e := range st.Tables() {
		if e.Branch != nil {
			continue
		}
		ts, err := g.openTable(ctx, e, edges[e.TableKey])
		if err != nil {
			return nil, nil, err
		}
		if err := probes.checkNoDrift(ctx, ts.ds, e); err != nil {
			return nil, nil, err
		}
		co := lance.CompactionOptions{TargetRowsPerFragment: lanceTargetRows, MaxBytesPerFile: o.MaxBytesPerFile}
		var staged *lance.Staged
		var c *lance.Compaction
		run := compactionRun(ts.ds.Manifest(), fanoutOrDefault(o.Fanout), o.MaxBytesPerFile)
		indexFirst := run != nil && g.indexWorkBeforeRun(o, e.Path, ts.ds)
		if o.All || run != nil && !indexFirst {
			if !o.All {
				co.Fragments = run
				co.MaterializeDeletionsThreshold = -1 // the run is merged whole, deletions or not
			}
			if staged, c, err = ts.ds.StageCompaction(ctx, co, lance.StageOptions{InlineTransactionOnly: true}); err != nil {
				return nil, nil, fmt.Errorf("plan the compaction of %s: %w", e.TableKey, err)
			}
		}
		if staged != nil {
			plans = append(plans, &compactionPlan{key: e.TableKey, entry: e, ts: ts, staged: staged, c: c, before: ts.ds.NumFragments()})
			continue
		}
		if !o.Indices {
			continue
		}
		staged, cols, err := g.stageIndexBuild(ctx, e.TableKey, e.Path, ts.ds, o.Fanout, slots)
		g.noteIndexWork(ctx, e.Path, err) // and again once compact wrote its files
		if err != nil {
			return nil, nil, err
		}
		if staged != nil {
			plans = append(plans, &compactionPlan{key: e.TableKey, entry: e, ts: ts, staged: staged, indices: cols, before: ts.ds.NumFragments()})
		}
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].key < plans[j].key })
	return plans, st, nil
}

// optimizePoints are a compaction's failpoints in the intent skeleton (it has no
// confirmation: recovery keeps whatever Rewrite landed).
var optimizePoints = intentPoints{armed: "optimize.after_sidecar", beforePublish: "optimize.before_publish",
	published: "optimize.after_publish"}

// compact runs the compaction's intent (intent.go): the Optimize sidecar beside the rewritten
// files (and check, the revalidation of plans made on the held state, when set), each Rewrite
// committed exactly at its pin + 1 (the tables side by side), one main publish from known (the
// snapshot the plans were checked against, or the one check read, so the publish need not
// probe __manifest again), the retirement.
func (g *Graph) compact(ctx context.Context, o OptimizeOptions, plans []*compactionPlan, known *publisher.State,
	check func(context.Context) (*publisher.State, error)) (*OptimizeResult, error) {
	pins := make([]recovery.OptimizeTable, len(plans))
	for i, p := range plans {
		pins[i] = recovery.OptimizeTable{Identity: p.entry.Identity, TableKey: p.key, ExpectedVersion: p.entry.Version}
	}
	sc, err := recovery.NewOptimizeSidecar(g.rootLoc, optString(o.Actor), pins)
	if err != nil {
		return nil, err
	}
	// Each table's next manifest is built now, with no request: the publish names it while
	// the tables commit.
	for _, p := range plans {
		if p.prepared, err = p.ts.ds.PrepareCommit(ctx, p.staged); err != nil {
			return nil, fmt.Errorf("prepare the commit of the compaction of %s: %w", p.key, err)
		}
		p.committed = p.prepared.Dataset()
	}
	var res *OptimizeResult
	in := &intent{g: g, points: optimizePoints,
		arm: func(ctx context.Context) (string, error) {
			g.ownSidecar.Store(sc.OperationID) // the check's listing leaves it out
			return sc.OperationID, recovery.Write(ctx, g.root, sc, g.fence)
		},
		// The rewritten files are written beside the sidecar: nothing references them until a
		// table commits, and no table commits before the sidecar is durable. An index build
		// planCompactions staged (the inline path) has its files written here too, so how this
		// ends is what indexWorkFirst remembers of it.
		stage: func(ctx context.Context) error {
			return parallel.Each(plans, TableConcurrency, func(p *compactionPlan) error {
				err := p.staged.WriteTransaction(ctx)
				if p.c == nil {
					g.noteIndexWork(ctx, p.entry.Path, err)
				}
				return err
			})
		},
		// The publish names the versions the Rewrites make at their exact pins + 1, so it
		// stages its files while the tables commit and waits for them (the gate) only before
		// its own commit.
		overlapCommit: true,
		commit: func(ctx context.Context) error {
			return parallel.Each(plans, TableConcurrency, func(p *compactionPlan) error {
				if _, err := p.prepared.Commit(ctx); err != nil {
					return fmt.Errorf("commit the compaction of %s: %w", p.key, err)
				}
				return failpoint.Inject("optimize.after_table_commit")
			})
		},
		publish: func(ctx context.Context, gate func() error) (err error) {
			res, err = g.publishCompaction(ctx, o, plans, known, gate)
			return err
		},
		failed: func() { g.forgetTables(plans) }, // re-read from storage on next use
	}
	if check != nil {
		in.check = func(ctx context.Context) (err error) {
			known, err = check(ctx)
			return err
		}
	}
	if err := in.run(ctx); err != nil {
		return nil, err
	}
	return res, nil
}

// publishCompaction publishes every rewritten table's pointer in one main commit and moves the
// cached id indexes to the rewritten fragments.
func (g *Graph) publishCompaction(ctx context.Context, o OptimizeOptions, plans []*compactionPlan, known *publisher.State, gate func() error) (*OptimizeResult, error) {
	commitID := ids.NewULID()
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}, Known: known, BeforeCommit: gate,
		Lineage: &publisher.Lineage{CommitID: commitID, ActorID: o.Actor, CreatedAt: time.Now().UnixMicro()}}
	for _, p := range plans {
		c := p.committed
		req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: p.entry.Identity, TableKey: p.key, Version: c.Version(),
			RowCount: c.CountRows(), Meta: publisher.VersionMetadata(c)})
		req.Expected[p.entry.Identity] = publisher.Expectation{TableKey: p.key, Version: p.entry.Version}
	}
	out, err := g.publisher("").Publish(ctx, req)
	if err != nil {
		return nil, err
	}
	res := &OptimizeResult{Tables: make([]TableCompaction, 0, len(plans))}
	for _, p := range plans {
		tc := TableCompaction{TableKey: p.key, FromVersion: p.entry.Version, ToVersion: p.committed.Version(), FragmentsBefore: p.before}
		if p.c == nil {
			p.ts.ds = p.committed // an index build moves no row
			tc.IndicesBuilt = p.indices
			res.Tables = append(res.Tables, tc)
			continue
		}
		if err := p.ts.readdress(p.c, p.committed); err != nil {
			g.forgetTables([]*compactionPlan{p})
		}
		tc.FragmentsRemoved, tc.FragmentsAdded, tc.RowsRewritten = p.c.FragmentsRemoved(), p.c.FragmentsAdded(), p.c.RowsRewritten()
		res.Tables = append(res.Tables, tc)
	}
	ci := commitInfo(out.Commit)
	res.Commit = &ci
	return res, nil
}

// forgetTables drops the cached state of the plans' tables.
func (g *Graph) forgetTables(plans []*compactionPlan) {
	for _, p := range plans {
		delete(g.tables, tableRef{path: p.entry.Path})
	}
}

// readdress moves the id index to the rewritten fragments: every row the compaction moved gets
// its new address; the rest keep theirs.
func (ts *tableState) readdress(c *lance.Compaction, committed *lance.Dataset) error {
	remap, err := c.Remap(committed)
	if err != nil {
		return err
	}
	lo, hi := c.Span()
	ts.ids.Readdress(remap, lo, hi)
	ts.ds = committed
	return nil
}
