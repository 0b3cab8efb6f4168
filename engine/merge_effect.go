package engine

import (
	"context"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/internal/parallel"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// mergeRun is one merge attempt from revalidation to publish.
type mergeRun struct {
	g          *Graph
	req        *MergeRequest
	plan       *mergePlan
	ident      lance.BranchIdentifier // the target's
	head       *string                // the target's exact graph_head row (nil: absent)
	sourceHead string
	commitID   string
	createdAt  int64
	sc         *recovery.Sidecar
}

// revalidate re-reads the target's authority before anything is armed: the head and
// identifier must be the captured ones, every table pin unchanged, and every table the merge
// will move at its Lance HEAD. A change returns ReadSetChanged; nothing was written.
func (m *mergeRun) revalidate(ctx context.Context) error {
	if err := m.g.recoveryBarrier(ctx, m.req.Target); err != nil {
		return err
	}
	pub := m.g.publisher(m.req.Target)
	st, err := pub.Snapshot(ctx)
	if err != nil {
		return err
	}
	if err := pub.CheckExactHead(ctx, st, &publisher.ExactHead{Identifier: m.ident, Head: m.head}); err != nil {
		return err
	}
	for _, t := range m.plan.tables {
		cur, ok := st.Table(t.key)
		if !ok || !samePointer(cur, t.target) {
			e := fmt.Sprint(t.target.Version)
			return &errs.ReadSetChanged{Member: "published_dataset_version:" + t.key, Expected: &e}
		}
		if t.writesRows() && !t.firstTouch {
			if err := checkNoDrift(ctx, t.tds, t.target); err != nil {
				return err
			}
		}
	}
	return nil
}

// mergePoints are a merge's failpoints in the intent skeleton.
var mergePoints = intentPoints{armed: "merge.after_arm", confirmed: "merge.after_confirm",
	beforePublish: "merge.before_publish", published: "merge.after_publish"}

// effect runs the merge's intent (intent.go): the BranchMerge sidecar, every table's chain (or
// ref fork), the confirmation, the merge commit, the retirement. A merge that moves no table
// HEAD (pointers and lineage only) arms nothing and only publishes.
func (m *mergeRun) effect(ctx context.Context) (*CommitInfo, error) {
	var ci *CommitInfo
	in := &intent{g: m.g, points: mergePoints}
	physical := false
	for _, t := range m.plan.tables {
		physical = physical || t.physical()
	}
	if !physical {
		in.publish = func(ctx context.Context, _ func() error) (err error) {
			ci, err = m.publish(ctx)
			return err
		}
	} else {
		in.arm = func(ctx context.Context) (string, error) {
			if err := m.arm(ctx); err != nil {
				return "", err
			}
			return m.sc.OperationID, nil
		}
		// Tables are independent datasets: their chains run side by side.
		in.commit = func(ctx context.Context) error {
			return parallel.Each(m.plan.tables, TableConcurrency, func(t *mergeTable) error { return m.apply(ctx, t) })
		}
		in.confirm = m.confirm
		in.publish = func(ctx context.Context, _ func() error) (err error) {
			if ci, err = m.publish(ctx); err == nil {
				m.fold(ctx) // a published merge's chains are what the cached indexes fold
			}
			return err
		}
	}
	if err := in.run(ctx); err != nil {
		return nil, err
	}
	return ci, nil
}

// arm writes the Armed v9 BranchMerge sidecar with every chain's pre-minted transactions.
func (m *mergeRun) arm(ctx context.Context) error {
	st := m.g.Contract().State
	spec := recovery.MergeSpec{
		Root:    m.g.rootLoc,
		Branch:  ids.BranchPtr(m.req.Target),
		ActorID: optString(m.req.Actor),
		Authority: recovery.Authority{BranchIdentifier: m.ident, GraphHead: m.head, SchemaIdentityDomain: st.Domain,
			SchemaIRHash: st.IRHash, SchemaIdentityVersion: st.IdentityVersion},
		Lineage: recovery.Lineage{GraphCommitID: m.commitID, Branch: ids.BranchPtr(m.req.Target), ActorID: optString(m.req.Actor),
			MergedParentCommitID: optString(m.sourceHead), CreatedAt: m.createdAt},
	}
	for _, t := range m.plan.tables {
		switch t.route {
		case RoutePointer:
			spec.Pointers = append(spec.Pointers, recovery.MergePointer{Identity: t.target.Identity, TableKey: t.key,
				ExpectedVersion: t.target.Version, TableBranch: t.source.Branch})
		case RouteRefFork:
			spec.Tables = append(spec.Tables, recovery.MergeTable{Identity: t.target.Identity, TableKey: t.key,
				ExpectedVersion: t.target.Version, TableBranch: ids.BranchPtr(m.req.Target), Kind: recovery.RefOnlyFork,
				SourceVersion: t.source.Version})
		default:
			mt := recovery.MergeTable{Identity: t.target.Identity, TableKey: t.key, ExpectedVersion: t.target.Version,
				TableBranch: t.target.Branch, Kind: recovery.MultiCommitHead}
			if t.firstTouch {
				v := t.target.Version
				mt.SourceForkVersion, mt.TableBranch = &v, ids.BranchPtr(m.req.Target)
			}
			t.uuids = make([]string, len(t.chunks))
			for i := range t.chunks {
				t.uuids[i] = lance.NewUUID()
				mt.Chain = append(mt.Chain, recovery.Transaction{ReadVersion: t.target.Version + uint64(i), UUID: t.uuids[i]})
			}
			spec.Tables = append(spec.Tables, mt)
		}
	}
	sc, err := recovery.NewMergeSidecar(spec)
	if err != nil {
		return err
	}
	sc.IngestReceipt = m.req.Receipt
	if err := recovery.Write(ctx, m.g.root, sc, m.g.fence); err != nil {
		return err
	}
	m.sc = sc
	return nil
}

// apply makes one table's physical effect: a ref fork, or the chain of exact commits (after
// forking the target's ref for a first touch).
func (m *mergeRun) apply(ctx context.Context, t *mergeTable) error {
	switch t.route {
	case RoutePointer:
		return nil
	case RouteRefFork:
		forked, err := m.g.forkOnto(ctx, t.tds, m.req.Target, t.key)
		if err != nil {
			return fmt.Errorf("ref fork of %s onto %s: %w", t.key, m.req.Target, err)
		}
		if t.refID, err = forked.Identifier(ctx); err != nil {
			return err
		}
		t.committed = forked
		return failpoint.Inject("merge.after_fork")
	}
	ds := t.tds
	if err := copyAdopted(ctx, t); err != nil {
		return err
	}
	if t.firstTouch {
		forked, err := m.g.forkOnto(ctx, ds, m.req.Target, t.key)
		if err != nil {
			return fmt.Errorf("fork %s onto %s: %w", t.key, m.req.Target, err)
		}
		if t.refID, err = forked.Identifier(ctx); err != nil {
			return err
		}
		if err := failpoint.Inject("merge.after_fork"); err != nil {
			return err
		}
		ds = forked
	}
	for i, c := range t.chunks {
		opts := lance.StageOptions{UUID: t.uuids[i], InlineTransactionOnly: true}
		var staged *lance.Staged
		var err error
		switch {
		case c.staged != nil:
			staged, err = c.staged, c.staged.Rebind(ds)
		case c.insertOnly:
			opts.Properties = map[string]string{lance.InsertAbsenceProperty: "v1"}
			staged, err = ds.StageInsertOnlyUpdate(ctx, c.recs, opts)
		default:
			staged, err = ds.StageRewriteRows(ctx, c.remove, c.recs, opts)
		}
		if err != nil {
			return fmt.Errorf("stage %s chunk %d: %w", t.key, i, err)
		}
		want := t.target.Version + uint64(i)
		next, err := ds.Commit(ctx, staged)
		if err != nil {
			return fmt.Errorf("commit %s chunk %d: %w", t.key, i, err)
		}
		if next.Version() != want+1 || staged.Txn.ReadVersion != want || next.Manifest().TransactionFile != staged.TransactionFileName() {
			return fmt.Errorf("commit %s chunk %d: landed at version %d, planned (%d, %s)", t.key, i, next.Version(), want, t.uuids[i])
		}
		ds = next
		if err := failpoint.Inject("merge.after_chain_commit"); err != nil {
			return err
		}
	}
	t.committed = ds
	return nil
}

// updates are the manifest updates the merge publishes, one per table.
func (m *mergeRun) updates() []publisher.DatasetUpdate {
	var out []publisher.DatasetUpdate
	for _, t := range m.plan.tables {
		if t.route == RoutePointer {
			s := t.source
			out = append(out, publisher.DatasetUpdate{Identity: s.Identity, TableKey: t.key, Version: s.Version, Branch: s.Branch,
				RowCount: s.RowCount, Meta: s.Meta})
			continue
		}
		c := t.committed
		out = append(out, publisher.DatasetUpdate{Identity: t.target.Identity, TableKey: t.key, Version: c.Version(),
			Branch: ids.BranchPtr(c.Branch()), RowCount: c.CountRows(), Meta: publisher.VersionMetadata(c)})
	}
	return out
}

func (m *mergeRun) confirm(ctx context.Context) error {
	refs := map[ids.TableIdentity]lance.BranchIdentifier{}
	for _, t := range m.plan.tables {
		if t.refID != nil {
			refs[t.target.Identity] = t.refID
		}
	}
	next, err := m.sc.ConfirmMerge(m.updates(), refs)
	if err != nil {
		return err
	}
	if err := recovery.Rewrite(ctx, m.g.root, next, m.g.fence); err != nil {
		return err
	}
	m.sc = next
	return nil
}

// publish is the single target publish, once the intent's gate has passed: ExactGraphHead,
// expected pins, the merge lineage (merged parent = the captured source head) and the receipt.
func (m *mergeRun) publish(ctx context.Context) (*CommitInfo, error) {
	req := publisher.Request{
		Updates:      m.updates(),
		Expected:     map[ids.TableIdentity]publisher.Expectation{},
		Lineage:      &publisher.Lineage{CommitID: m.commitID, ActorID: m.req.Actor, MergedParent: m.sourceHead, CreatedAt: m.createdAt},
		Precondition: &publisher.ExactHead{Identifier: m.ident, Head: m.head},
		Receipt:      m.req.Receipt,
	}
	for _, t := range m.plan.tables {
		req.Expected[t.target.Identity] = publisher.Expectation{TableKey: t.key, Version: t.target.Version}
	}
	out, err := m.g.publisher(m.req.Target).Publish(ctx, req)
	if err != nil {
		return nil, err
	}
	ci := commitInfo(out.Commit)
	return &ci, nil
}

// fold keeps the cached id indexes of the target's tables current with the chains just
// committed; tables it cannot fold are dropped and re-read on next use.
func (m *mergeRun) fold(ctx context.Context) {
	for _, t := range m.plan.tables {
		ref := tableRef{path: t.target.Path, branch: derefOr(t.target.Branch)}
		ts, ok := m.g.tables[ref]
		if !ok || t.firstTouch || t.route == RouteRefFork || t.route == RoutePointer || ts.ds.Version() != t.target.Version {
			delete(m.g.tables, ref)
			continue
		}
		if err := t.loadIDs(ctx); err != nil {
			delete(m.g.tables, ref)
			continue
		}
		if err := ts.applyChain(t); err != nil {
			delete(m.g.tables, ref)
		}
	}
}

// copyAdopted prepares every certified chunk before the chain starts, several at a time: it
// copies the chunk's files and stages its transaction at the version it will read (the chain
// is planned: chunk i reads pin+i), writing the transaction file too, so each commit of the
// chain then writes only its manifest. (What a crash strands here is unreferenced files, like
// any staged file.)
func copyAdopted(ctx context.Context, t *mergeTable) error {
	type job struct {
		i int
		c *mergeChunk
	}
	var jobs []job
	for i, c := range t.chunks {
		if c.adopt != nil {
			jobs = append(jobs, job{i, c})
		}
	}
	return parallel.Each(jobs, TableConcurrency, func(j job) error {
		copied, err := t.tds.CopyFragments(ctx, t.sds, j.c.adopt)
		if err != nil {
			return err
		}
		st := t.tds.StageInsertFragments(copied, lance.StageOptions{UUID: t.uuids[j.i], InlineTransactionOnly: true,
			Properties: map[string]string{lance.InsertAbsenceProperty: "v1"}})
		st.Txn.ReadVersion = t.target.Version + uint64(j.i)
		if err := st.WriteTransaction(ctx); err != nil {
			return err
		}
		j.c.staged = st
		return nil
	})
}
