package recovery

import (
	"context"
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// mergeObs is what recovery sees of one BranchMerge table.
type mergeObs struct {
	pin      TablePin
	effect   *MergeEffect
	rel      string
	ds       *lance.Dataset // HEAD on the pin's branch; nil when the ref does not exist
	head     uint64
	prefix   int  // MultiCommitHead: how many chain steps landed, contiguously from the pin
	restored bool // HEAD is a Restore to the pin right after the owned prefix
	taken    bool // HEAD is this merge's take of the pin (take.go): no step of its own landed
	created  bool // a first-touch or ref-only ref this intent made exists
	noRef    bool // a first-touch ref does not exist (a crash may have left its clone-only tree)
}

func (t *mergeObs) firstTouch() bool {
	return t.effect.Kind.Kind == RefOnlyFork || t.effect.Kind.SourceForkVersion != nil
}

// owned says the table carries some of this intent's effect.
func (t *mergeObs) owned() bool {
	if t.effect.Kind.Kind == RefOnlyFork {
		return t.created
	}
	return t.prefix > 0
}

// complete says the whole planned effect landed and nothing else did.
func (t *mergeObs) complete() bool {
	if t.effect.Kind.Kind == RefOnlyFork {
		return t.created && t.head == t.effect.Kind.SourceVersion
	}
	return t.prefix == len(t.effect.Kind.PlannedTransactions) && t.head == t.pin.PostCommitPin
}

// resolveMerge runs the v9 BranchMerge procedure: a visible outcome is finalized; a complete,
// confirmed chain whose target authority still holds rolls forward under the original lineage;
// anything else (Full mode) is compensated: owned chain prefixes are restored, refs this intent
// created are removed, and the pre-minted rollback commit is published. A foreign or
// non-contiguous transaction fails closed.
func resolveMerge(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, fence Fence) (Outcome, error) {
	p4 := sc.ProtocolV4
	o, pub, st, done, err := openIntent(ctx, root, sc, mode, fence, p4.Lineage.GraphCommitID, p4.RollbackGraphCommitID,
		confirmedOutcomes(p4.IntendedDelta), p4.RollbackAuditOutcomes)
	if done || err != nil {
		return o, err
	}
	obs, err := observeMerge(ctx, root, sc, st)
	if err != nil {
		return o, err
	}
	owned, complete := false, true
	for _, t := range obs {
		owned = owned || t.owned()
		complete = complete && t.complete()
	}
	if !owned {
		return retireMerge(ctx, root, sc, mode, o, pub, obs, fence)
	}
	holds, err := authorityHolds(ctx, root, pub, st, p4.Authority)
	if err != nil {
		return o, err
	}
	if complete && p4.EffectPhase == EffectsConfirmed && holds {
		return rollMergeForward(ctx, root, sc, pub, fence)
	}
	if mode == RollForwardOnly {
		o.Action, o.Reason = Deferred, "this merge needs a rollback; reopen the graph read-write (worker recover) to resolve it"
		return o, nil
	}
	return rollMergeBack(ctx, root, sc, pub, obs, fence)
}

// observeMerge reads each pinned table on its target branch and matches the versions above the
// pin against the pre-minted chain.
func observeMerge(ctx context.Context, root storage.Store, sc *Sidecar, st *publisher.State) ([]*mergeObs, error) {
	p4 := sc.ProtocolV4
	rootLoc := RootLocation(root)
	var out []*mergeObs
	for i := range sc.Tables {
		t := &mergeObs{pin: sc.Tables[i]}
		for j := range p4.Effects {
			if p4.Effects[j].Identity == t.pin.Identity {
				t.effect = &p4.Effects[j]
			}
		}
		if e, ok := st.Table(t.pin.TableKey); !ok || e.Identity != t.pin.Identity || e.Version != t.pin.ExpectedVersion {
			return nil, refuseState(t.pin.TableKey, false, ": the target manifest no longer pins it at %d; refusing to guess", t.pin.ExpectedVersion)
		}
		rel, err := t.pin.relPath(rootLoc)
		if err != nil {
			return nil, err
		}
		t.rel = rel
		ds, err := lance.Open(ctx, root.Sub(rel), lance.WithBranch(deref(t.pin.TableBranch)))
		var be *lance.BranchError
		switch {
		case errors.As(err, &be):
			t.noRef = t.firstTouch() // a first-touch ref never created: nothing moved
			out = append(out, t)
			continue
		case err != nil:
			return nil, err
		}
		t.ds, t.head = ds, ds.Version()
		t.created = t.firstTouch()
		if t.effect.Kind.Kind == RefOnlyFork {
			if t.head != t.effect.Kind.SourceVersion {
				return nil, refuseState(t.pin.TableKey, true, ": the ref-only fork moved to %d past its source version %d (foreign commits); refusing", t.head, t.effect.Kind.SourceVersion)
			}
			out = append(out, t)
			continue
		}
		if err := t.matchChain(ctx, sc.OperationID); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// matchChain counts the contiguous prefix of the planned chain above the pin and recognizes a
// compensating Restore right after it; any other version above the pin fails closed.
func (t *mergeObs) matchChain(ctx context.Context, op string) error {
	base := t.pin.ExpectedVersion
	if t.head < base {
		return refuseState(t.pin.TableKey, false, ": Lance HEAD %d is behind its pin %d (invariant violation); refusing", t.head, base)
	}
	for _, planned := range t.effect.Kind.PlannedTransactions {
		v := base + uint64(t.prefix) + 1
		if v > t.head {
			break
		}
		txn, err := t.ds.ReadTransaction(ctx, v)
		if err != nil {
			return err
		}
		if txn.UUID != planned.UUID || txn.ReadVersion != planned.ReadVersion {
			break
		}
		t.prefix++
	}
	top := base + uint64(t.prefix)
	switch {
	case t.head == top:
		return nil
	case t.prefix == 0 && t.head == top+1:
		taken, err := isTake(ctx, t.ds, t.head, op, t.pin.Identity, base)
		if err != nil {
			return err
		}
		if taken {
			t.taken = true
			return nil
		}
	case t.prefix > 0 && t.head == top+1:
		txn, err := t.ds.ReadTransaction(ctx, t.head)
		if err != nil {
			return err
		}
		if txn.Op.Kind == lance.OpRestore && txn.Op.RestoreVersion == base {
			t.restored = true
			return nil
		}
	}
	return refuseState(t.pin.TableKey, true, ": version %d above the merge's %d planned steps is not this merge's (foreign or non-contiguous); refusing", top+1, t.prefix)
}

// rollMergeForward publishes the confirmed delta under the original merge lineage.
func rollMergeForward(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence) (Outcome, error) {
	p4 := sc.ProtocolV4
	return publishForward(ctx, root, sc, pub, fence, p4.Lineage, p4.Authority, p4.IntendedDelta)
}

// rollMergeBack compensates: the rollback plan is made durable first, then every owned chain
// on a table the target already owned is restored to its pin, every ref this merge created is
// removed, and the rollback commit publishes the restored pins.
func rollMergeBack(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, obs []*mergeObs, fence Fence) (Outcome, error) {
	p4 := sc.ProtocolV4
	if p4.RollbackAuditOutcomes == nil {
		outcomes := []TableOutcome{}
		for _, t := range obs {
			if t.taken || t.takeable() {
				outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: t.pin.ExpectedVersion, ToVersion: t.pin.ExpectedVersion})
			}
			if t.owned() {
				from := t.head
				if t.restored {
					from = t.head - 1
				}
				outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: from, ToVersion: t.pin.ExpectedVersion})
			}
		}
		next := *sc
		np4 := *p4
		np4.RollbackAuditOutcomes = outcomes
		next.ProtocolV4 = &np4
		if err := Rewrite(ctx, root, &next, fence); err != nil {
			return Outcome{}, fmt.Errorf("persist the rollback plan: %w", err)
		}
		sc, p4 = &next, &np4
	}
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	for _, t := range obs {
		var err error
		switch {
		case t.taken:
			addPointer(&req, t.pin, t.ds, t.pin.ExpectedVersion)
		case t.takeable():
			// A chain the merge has not started: its writer may still start it.
			err = take(ctx, &req, sc.OperationID, t.pin, t.ds, fence)
		case t.owned() && !t.firstTouch():
			err = restoreOwned(ctx, &req, t.pin, t.ds, t.pin.ExpectedVersion, t.restored, fence)
		}
		if err != nil {
			return Outcome{}, err
		}
	}
	// Refs this merge created are unregistered: removing them undoes their effect entirely.
	if err := removeMergeRefs(ctx, root, obs); err != nil {
		return Outcome{}, err
	}
	return publishRollback(ctx, root, sc, pub, fence, req, p4.RollbackGraphCommitID, p4.RollbackAuditOutcomes)
}

// takeable says the table's first chain step is still free on a ref the target already owned,
// so a stale writer could commit it.
func (t *mergeObs) takeable() bool {
	return t.ds != nil && !t.taken && !t.firstTouch() && t.effect.Kind.Kind != RefOnlyFork && len(t.effect.Kind.PlannedTransactions) > 0 &&
		t.prefix == 0 && t.head == t.pin.ExpectedVersion
}

// retireMerge retires a merge no table carries: as retireLoad, it takes the first chain step
// of every table still free and publishes the takes under the rollback commit, or discards
// the intent when there is nothing to take; the refs it created are removed either way.
func retireMerge(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, o Outcome, pub *publisher.Publisher, obs []*mergeObs, fence Fence) (Outcome, error) {
	if mode == RollForwardOnly {
		return discardEffectless(ctx, root, sc, mode, o, nil)
	}
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	outcomes := []TableOutcome{}
	for _, t := range obs {
		switch {
		case t.taken:
			addPointer(&req, t.pin, t.ds, t.pin.ExpectedVersion)
		case t.takeable():
			if err := take(ctx, &req, sc.OperationID, t.pin, t.ds, fence); err != nil {
				return o, err
			}
		default:
			continue
		}
		outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: t.pin.ExpectedVersion, ToVersion: t.pin.ExpectedVersion})
	}
	refs := func() error { return removeMergeRefs(ctx, root, obs) }
	if len(req.Updates) == 0 {
		return discardEffectless(ctx, root, sc, mode, o, refs)
	}
	if err := refs(); err != nil {
		return o, err
	}
	return publishRollback(ctx, root, sc, pub, fence, req, sc.ProtocolV4.RollbackGraphCommitID, outcomes)
}

// removeMergeRefs deletes the first-touch and ref-only refs this merge created (they are never
// registered in the target manifest before the merge publishes).
func removeMergeRefs(ctx context.Context, root storage.Store, obs []*mergeObs) error {
	for _, t := range obs {
		if err := removeOwnRef(ctx, root, t.pin, t.rel, t.noRef, t.created); err != nil {
			return err
		}
	}
	return nil
}
