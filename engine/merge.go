package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Merge outcomes (BranchMergeOutcome).
const (
	OutcomeAlreadyUpToDate = "already_up_to_date"
	OutcomeFastForward     = "fast_forward"
	OutcomeMerged          = "merged"
)

// Merge routes a table can take.
const (
	RouteCertified = "certified" // every source transaction since the base is a certified insert
	RouteDiff      = "diff"      // ordinary three-way diff
	RoutePointer   = "pointer"   // the target adopts an existing table version, nothing is written
	RouteRefFork   = "ref_fork"  // the target's first touch: a Lance ref on the source version
)

// MergeRequest folds branch Source into branch Target as one graph commit.
type MergeRequest struct {
	Source, Target string // "" or "main" is main
	// DeleteSource deletes the source branch after every successful outcome; a failed delete is
	// reported in the result and never fails the merge.
	DeleteSource bool
	Actor        string
	Receipt      *publisher.Receipt // written with the merge commit; a visible one makes the merge a no-op
	// NoCertifiedRoute forces the ordinary diff even where the certified-insert proof holds
	// (tests and benchmarks compare the two routes).
	NoCertifiedRoute bool
}

// MergeTableStats is what a merge did to one table.
type MergeTableStats struct {
	TableKey     string `json:"table_key"`
	Route        string `json:"route"`
	Inserted     int    `json:"inserted"`
	Updated      int    `json:"updated"`
	Deleted      int    `json:"deleted"`
	Transactions int    `json:"transactions"`
}

// MergeResult is the merge receipt.
type MergeResult struct {
	Source  string            `json:"source"`
	Target  string            `json:"target"`
	Outcome string            `json:"outcome"`
	ActorID *string           `json:"actor_id"`
	Commit  *CommitInfo       `json:"commit,omitempty"`
	Tables  []MergeTableStats `json:"tables"`
	// With DeleteSource, BranchDeleted says whether the source is gone; when it is not,
	// BranchKept is true and BranchKeptReason says why (main is never deleted; a delete that
	// failed also sets BranchDeleteError). Both are absent without DeleteSource.
	BranchDeleted     *bool  `json:"branch_deleted,omitempty"`
	BranchDeleteError string `json:"branch_delete_error,omitempty"`
	BranchKept        *bool  `json:"branch_kept,omitempty"`
	BranchKeptReason  string `json:"branch_kept_reason,omitempty"`
	AlreadyApplied    bool   `json:"already_applied,omitempty"`
}

// MainNeverDeleted is the BranchKeptReason of a merge from main with DeleteSource.
const MainNeverDeleted = "main is never deleted"

// Merge runs a three-way, per-entity merge of req.Source into req.Target against their common
// ancestor commit and publishes it as one commit on the target (two parents when merged).
// Conflicts return *errs.MergeConflicts with nothing written; any failure after the BranchMerge
// sidecar is armed returns *errs.RecoveryRequired.
func (g *Graph) Merge(ctx context.Context, req MergeRequest) (*MergeResult, error) {
	if err := CheckBranchName("source", req.Source); err != nil {
		return nil, err
	}
	if err := CheckBranchName("target", req.Target); err != nil {
		return nil, err
	}
	req.Source, req.Target = normBranch(req.Source), normBranch(req.Target)
	if req.Source == req.Target {
		return nil, &errs.InvalidInput{Field: "source", Reason: "a merge needs distinct source and target branches"}
	}
	release, err := g.enter(ctx) // the barriers follow the receipt check, in merge
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := g.merge(ctx, &req)
	if err != nil {
		return nil, err
	}
	if req.DeleteSource {
		deleted, kept := true, false
		if req.Source == "" {
			deleted, kept, res.BranchKeptReason = false, true, MainNeverDeleted
		} else if err := g.deleteBranch(ctx, req.Source); err != nil {
			var bnf *errs.BranchNotFound
			if !errors.As(err, &bnf) { // already gone (a redelivered merge): nothing left to delete
				deleted, kept, res.BranchDeleteError = false, true, err.Error()
				res.BranchKeptReason = "the delete failed: " + err.Error()
			}
		}
		res.BranchDeleted = &deleted
		if kept {
			res.BranchKept = &kept
		}
	}
	return res, nil
}

func (g *Graph) merge(ctx context.Context, req *MergeRequest) (*MergeResult, error) {
	res := &MergeResult{Source: ids.BranchKey(req.Source), Target: ids.BranchKey(req.Target), Tables: []MergeTableStats{}, ActorID: optString(req.Actor)}
	tpub := g.publisher(req.Target)
	tst, err := tpub.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if req.Receipt != nil {
		// By key, and under a rule by the key older builds wrote (publisher.State.ReceiptFor).
		rc, ok, err := tst.ReceiptFor(ctx, req.Receipt)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := sameBody(req.Receipt, rc); err != nil {
				return nil, err
			}
			res.Outcome, res.AlreadyApplied = OutcomeMerged, true
			ci, err := receiptCommit(ctx, tst, rc)
			if err != nil {
				return nil, err
			}
			res.Commit = &ci
			return res, nil
		}
	}
	for _, b := range []string{req.Target, req.Source} {
		if err := g.recoveryBarrier(ctx, b); err != nil {
			return nil, err
		}
	}
	sst, err := g.publisher(req.Source).Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	tIdent, err := tpub.BranchIdentifier(ctx)
	if err != nil {
		return nil, err
	}
	var tHeadRow *string
	if h, ok := tst.Head(req.Target); ok {
		tHeadRow = &h
	}
	tHead, sHead := headOf(tst, req.Target), headOf(sst, req.Source)
	rel, err := relate(&lineage{ctx: ctx, states: []*publisher.State{tst, sst}}, tHead, sHead)
	if err != nil {
		return nil, err
	}
	res.Outcome = rel.outcome
	if rel.outcome == OutcomeAlreadyUpToDate {
		return res, nil
	}
	bst := tst
	if rel.base.ID != tHead {
		if bst, err = publisher.Open(g.root, derefOr(rel.base.Branch)).SnapshotAt(ctx, rel.base.ManifestVersion); err != nil {
			return nil, fmt.Errorf("merge: read the merge base %s: %w", rel.base.ID, err)
		}
	}
	plan, err := g.planMerge(ctx, req, bst, sst, tst)
	if err != nil {
		return nil, err
	}
	for _, t := range plan.tables {
		res.Tables = append(res.Tables, t.stats)
	}
	m := &mergeRun{g: g, req: req, plan: plan, ident: tIdent, head: tHeadRow, sourceHead: sHead,
		commitID: ids.NewULID(), createdAt: time.Now().UnixMicro()}
	// Newer than both parents, whatever the clocks said (relate relies on it); the publisher
	// sees to the target-side parent.
	if m.createdAt <= rel.source.Meta.CreatedAt {
		m.createdAt = rel.source.Meta.CreatedAt + 1
	}
	if err := m.revalidate(ctx); err != nil {
		return nil, err
	}
	ci, err := m.effect(ctx)
	if err != nil {
		return nil, err
	}
	res.Commit = ci
	return res, nil
}

// headOf is a branch's head commit: its graph_head row, or for a branch without commits of its
// own, the newest commit it inherited.
func headOf(st *publisher.State, branch string) string {
	if h, ok := st.Head(branch); ok {
		return h
	}
	if c := st.LineageHead(); c != nil {
		return c.ID
	}
	return ""
}

// openAt opens a table at exactly a manifest pointer.
func (g *Graph) openAt(ctx context.Context, e publisher.TableEntry) (*lance.Dataset, error) {
	ds, err := lance.Open(ctx, g.root.Sub(e.Path), lance.WithBranch(derefOr(e.Branch)), lance.AtVersion(e.Version))
	if err != nil {
		return nil, fmt.Errorf("open table %s at %s@%d: %w", e.TableKey, ids.BranchKey(derefOr(e.Branch)), e.Version, err)
	}
	return ds, nil
}

func samePointer(a, b publisher.TableEntry) bool {
	return a.Identity == b.Identity && a.Version == b.Version && derefOr(a.Branch) == derefOr(b.Branch)
}
