package recovery

import (
	"context"
	"errors"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// resolveSchemaApply settles a v9 SchemaApply intent (protocol_v7).
//
//   - Its commit visible: the staged contract is promoted (a crash between the publish and
//     the promotion, or between two promoted files) and the intent finalized.
//   - Its rollback commit visible: the staging is removed and the intent finalized.
//   - EffectsConfirmed, every table at exactly its confirmed version by its planned
//     transaction, and main's authority (identifier, head, accepted schema) unchanged: roll
//     forward — the complete delta (registrations, renames, updates, tombstones) under the
//     original lineage, then the promotion.
//   - Otherwise, in a full pass, roll back: each overwritten table restored to its pin, each
//     version-one dataset the intent created (and nobody registered) removed, the staging
//     removed; the restored pointers, if any, published under the rollback commit. A foreign
//     or buried effect fails closed. The heal (RollForwardOnly) defers a rollback.
func resolveSchemaApply(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, fence Fence) (Outcome, error) {
	p := sc.ProtocolV7
	o := Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey("")}
	pub := publisher.Open(root, "")
	st, err := pub.Snapshot(ctx)
	if err != nil {
		return o, err
	}
	if _, visible, err := st.Commit(ctx, p.Lineage.GraphCommitID, 0); err != nil {
		return o, err
	} else if visible {
		if err := PromoteSchemaStaging(ctx, root, p.TargetSchemaIRHash); err != nil {
			return o, err
		}
		return finalize(ctx, root, sc, RolledForward, p.Lineage.GraphCommitID, confirmedOutcomes(p.IntendedDelta))
	}
	if _, visible, err := st.Commit(ctx, p.RollbackGraphCommitID, 0); err != nil {
		return o, err
	} else if visible {
		if err := DiscardSchemaStaging(ctx, root); err != nil {
			return o, err
		}
		return finalize(ctx, root, sc, RolledBack, p.RollbackGraphCommitID, p.RollbackAuditOutcomes)
	}
	obs, err := observeSchema(ctx, root, sc, st)
	if err != nil {
		return o, err
	}
	allForward := true
	for _, t := range obs {
		if t.class == InvariantViolation {
			return o, refuseState(t.pin.TableKey, false, ": Lance HEAD %d is behind its manifest pin %d (invariant violation); refusing", t.head, t.pinned)
		}
		allForward = allForward && t.class == RolledPastExpected
	}
	holds, err := authorityHolds(ctx, root, pub, st, p.Authority)
	if err != nil {
		return o, err
	}
	if p.EffectPhase == EffectsConfirmed && allForward && holds {
		return rollForwardSchema(ctx, root, sc, pub, fence)
	}
	if mode == RollForwardOnly {
		o.Action, o.Reason = Deferred, "this schema apply needs a rollback; reopen the graph read-write (worker recover) to resolve it"
		return o, nil
	}
	return rollBackSchema(ctx, root, sc, pub, obs, fence)
}

// observeSchema reads each pinned table as observe does for a load. A table is found in the
// manifest by identity (a renamed one is still under its old key there); an added type's
// dataset may not exist at all.
func observeSchema(ctx context.Context, root storage.Store, sc *Sidecar, st *publisher.State) ([]*tableObs, error) {
	p := sc.ProtocolV7
	rootLoc := RootLocation(root)
	live := map[ids.TableIdentity]publisher.TableEntry{}
	for _, e := range st.Tables() {
		live[e.Identity] = e
	}
	var out []*tableObs
	for i := range sc.Tables {
		t := &tableObs{pin: sc.Tables[i]}
		for j := range p.IntendedDelta.TableUpdates {
			if p.IntendedDelta.TableUpdates[j].Identity == t.pin.Identity {
				t.slot = &p.IntendedDelta.TableUpdates[j]
			}
		}
		for _, e := range p.Effects {
			if e.Identity == t.pin.Identity {
				t.effect = &Effect{Identity: e.Identity, TableKey: e.TableKey, PlannedTransaction: e.PlannedTransaction, ConfirmedTransaction: e.ConfirmedTransaction}
			}
		}
		if e, ok := live[t.pin.Identity]; ok {
			t.pinned = e.Version
			t.pin.TableKey = e.TableKey // restores and takes address the table as the manifest has it
		}
		rel, err := t.pin.relPath(rootLoc)
		if err != nil {
			return nil, err
		}
		t.rel = rel
		ds, err := lance.Open(ctx, root.Sub(rel))
		var nf *lance.VersionNotFoundError
		switch {
		case errors.As(err, &nf):
			t.head = t.pinned // an added type's dataset never created
		case err != nil:
			return nil, err
		default:
			t.ds, t.head = ds, ds.Version()
		}
		// A rollback that died after taking this table's planned version finds its take here.
		if t.ds != nil && t.pin.ExpectedVersion > 0 && t.head == t.pinned+1 && t.pinned == t.pin.ExpectedVersion {
			if t.taken, err = isTake(ctx, t.ds, t.head, sc.OperationID, t.pin.Identity, t.pinned); err != nil {
				return nil, err
			}
		}
		if t.ds != nil && t.head >= t.pin.PostCommitPin && t.effect != nil && !t.taken {
			if err := t.findOwnership(ctx); err != nil {
				return nil, err
			}
		}
		t.class = classifyPhase(p.EffectPhase, t)
		out = append(out, t)
	}
	return out, nil
}

// rollForwardSchema publishes the confirmed delta under the original lineage, then promotes.
func rollForwardSchema(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence) (Outcome, error) {
	p := sc.ProtocolV7
	req := SchemaApplyRequest(sc)
	if err := failpoint.Inject(forwardPoints.before); err != nil {
		return Outcome{}, err
	}
	if err := fence.Check(ctx, "publish"); err != nil {
		return Outcome{}, err
	}
	if _, err := pub.Publish(ctx, req); err != nil {
		return Outcome{}, err
	}
	if err := failpoint.Inject(forwardPoints.after); err != nil {
		return Outcome{}, err
	}
	if err := PromoteSchemaStaging(ctx, root, p.TargetSchemaIRHash); err != nil {
		return Outcome{}, err
	}
	return finalize(ctx, root, sc, RolledForward, p.Lineage.GraphCommitID, confirmedOutcomes(p.IntendedDelta))
}

// SchemaApplyRequest is the one __manifest publish of a confirmed SchemaApply intent, the
// writer's and recovery's alike: every registration, rename, confirmed table update and
// tombstone, each table expected where the intent found it, the original lineage,
// ExactGraphHead on the captured authority, and the queue receipt the intent carries.
func SchemaApplyRequest(sc *Sidecar) publisher.Request {
	p := sc.ProtocolV7
	l := p.Lineage
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{},
		Lineage:      &publisher.Lineage{CommitID: l.GraphCommitID, ActorID: deref(l.ActorID), CreatedAt: l.CreatedAt},
		Precondition: &publisher.ExactHead{Identifier: p.Authority.BranchIdentifier, Head: p.Authority.GraphHead},
		Receipt:      sc.IngestReceipt}
	d := p.IntendedDelta
	from := map[ids.TableIdentity]string{}
	for _, r := range d.Renames {
		from[r.Identity] = r.ExpectedTableKey
		req.Renames = append(req.Renames, publisher.Rename{Identity: r.Identity, ExpectedTableKey: r.ExpectedTableKey, TableKey: r.TableKey})
		req.Expected[r.Identity] = publisher.Expectation{TableKey: r.ExpectedTableKey, Version: r.ExpectedVersion}
	}
	for _, r := range d.Registrations {
		req.Registrations = append(req.Registrations, publisher.Registration{Identity: r.Identity, TableKey: r.TableKey})
		req.Expected[r.Identity] = publisher.Expectation{TableKey: r.TableKey, Version: 0}
	}
	for _, s := range d.TableUpdates {
		c := s.Confirmed
		req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: s.Identity, TableKey: s.TableKey, Version: c.TableVersion,
			Branch: c.TableBranch, RowCount: c.RowCount, Meta: c.VersionMetadata})
		key := s.TableKey
		if k, ok := from[s.Identity]; ok {
			key = k
		}
		req.Expected[s.Identity] = publisher.Expectation{TableKey: key, Version: s.ExpectedVersion}
	}
	for _, t := range d.Tombstones {
		req.Tombstones = append(req.Tombstones, publisher.Tombstone{Identity: t.Identity, TableKey: t.TableKey, Version: t.TombstoneVersion})
		req.Expected[t.Identity] = publisher.Expectation{TableKey: t.TableKey, Version: t.TombstoneVersion - 1}
	}
	return req
}

// rollBackSchema undoes what the intent owns. An overwritten table is restored to its pin (or,
// untouched, its planned version taken so a paused writer cannot commit it later; a take an
// earlier pass made is published as it is); a dataset
// the intent created is removed while version one is its own and nothing registered it; a
// table another writer moved past the intent's effect fails closed.
func rollBackSchema(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, obs []*tableObs, fence Fence) (Outcome, error) {
	p := sc.ProtocolV7
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	outcomes := []TableOutcome{}
	var created []*tableObs
	for _, t := range obs {
		first := t.pin.ExpectedVersion == 0
		switch {
		case first && t.ds == nil:
			continue
		case first && t.pinned != 0:
			return Outcome{}, refuseState(t.pin.TableKey, true, ": the dataset this schema apply created is registered; refusing to remove it")
		case first && t.ownAt == 1 && t.head == 1:
			created = append(created, t)
			continue
		case first:
			continue // a dataset someone else made at this path: never adopted, never removed
		case t.taken:
			addPointer(&req, t.pin, t.ds, t.pinned)
		case t.ownAt != 0 && t.ownAt != t.head && !t.restored:
			return Outcome{}, refuseState(t.pin.TableKey, true, ": this schema apply's effect at version %d is buried under HEAD %d; refusing to restore through another writer's commit", t.ownAt, t.head)
		case t.ownAt != 0:
			if err := restoreOwned(ctx, &req, t.pin, t.ds, t.pinned, t.restored, fence); err != nil {
				return Outcome{}, err
			}
		case t.head == t.pinned && t.head < t.pin.PostCommitPin:
			if err := take(ctx, &req, sc.OperationID, t.pin, t.ds, fence); err != nil {
				return Outcome{}, err
			}
		case t.head != t.pinned:
			return Outcome{}, refuseState(t.pin.TableKey, true, ": Lance HEAD %d moved past its manifest pin %d by another writer; refusing", t.head, t.pinned)
		}
		outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: t.head, ToVersion: t.pinned})
	}
	for _, t := range created {
		if err := fence.Check(ctx, "remove "+t.pin.TableKey); err != nil {
			return Outcome{}, err
		}
		if err := root.DeletePrefix(ctx, t.rel); err != nil {
			return Outcome{}, err
		}
	}
	if err := DiscardSchemaStaging(ctx, root); err != nil {
		return Outcome{}, err
	}
	if len(req.Updates) == 0 {
		if err := Delete(ctx, root, sc.OperationID); err != nil {
			return Outcome{}, err
		}
		return Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey(""), Action: Discarded}, nil
	}
	return publishRollback(ctx, root, sc, pub, fence, req, p.RollbackGraphCommitID, outcomes)
}
