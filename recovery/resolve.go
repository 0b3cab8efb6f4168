package recovery

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// Mode says how far a recovery pass may go.
type Mode int

const (
	// Full recovery runs on a read-write open and from `worker recover`: it rolls confirmed
	// intents forward and restores (rolls back) the rest.
	Full Mode = iota
	// RollForwardOnly is the heal at the entry of every write: it finishes confirmed intents
	// whose authority still holds and finalizes visible outcomes, and never restores.
	RollForwardOnly
)

// Table classifications (the reference's names).
const (
	RolledPastExpected       = "RolledPastExpected"
	NoMovement               = "NoMovement"
	UnexpectedAtP1           = "UnexpectedAtP1"
	UnexpectedMultistep      = "UnexpectedMultistep"
	UnexpectedEffectIdentity = "UnexpectedEffectIdentity"
	IncompletePhaseB         = "IncompletePhaseB"
	InvariantViolation       = "InvariantViolation"
)

// Outcome is what recovery did with one sidecar.
type Outcome struct {
	OperationID   string         `json:"operation_id"`
	Branch        string         `json:"branch"`
	Action        string         `json:"action"` // RolledForward, RolledBack, Discarded, Deferred
	GraphCommitID string         `json:"graph_commit_id,omitempty"`
	Tables        []TableOutcome `json:"tables"`
	Reason        string         `json:"reason,omitempty"`
}

// Actions beyond the audit kinds.
const (
	Discarded = "Discarded" // no effect was ever made: the sidecar is simply removed
	Deferred  = "Deferred"  // left for a Full pass (heal never restores)
)

type tableObs struct {
	pin      TablePin
	slot     *TableUpdate
	effect   *Effect
	ds       *lance.Dataset // HEAD on the pin's branch; nil when the branch ref does not exist
	head     uint64
	pinned   uint64
	class    string
	ownAt    uint64 // version carrying the planned transaction (0: none)
	restored bool   // HEAD is a Restore to the pin right after the owned effect
	taken    bool   // HEAD is this intent's take of the pin (take.go): nothing of its own moved
	// untouchedFork: a first-touch branch ref this intent created that never got a commit
	// (HEAD at the inherited version, not registered in the manifest).
	untouchedFork bool
	noRef         bool   // a first-touch ref that does not exist (maybe a clone-only tree)
	rel           string // table path under the root
}

// Recover resolves every pending sidecar under root, oldest first. Outcomes are returned for
// the sidecars it acted on or deferred; the first sidecar it cannot resolve stops the pass with
// an error and stays in place. The writer's fence is checked before each sidecar is resolved
// and again before each publish, as the forward path checks it before arming and publishing:
// a failed fence stops the pass with a *FenceError and nothing written at that step.
func Recover(ctx context.Context, root storage.Store, mode Mode, fence Fence) ([]Outcome, error) {
	listed, err := List(ctx, root)
	if err != nil {
		return nil, err
	}
	var out []Outcome
	for _, l := range listed {
		// A stale writer that commits a table while recovery takes it makes recovery observe
		// again; it cannot do so twice for one version, so a few rounds settle it.
		for round := 1; ; round++ {
			o, ok, err := resolveListed(ctx, root, l, mode, fence)
			if errors.Is(err, errRaced) && round < 4 {
				continue
			}
			if err != nil {
				return out, err
			}
			if ok {
				out = append(out, o)
			}
			break
		}
	}
	return out, nil
}

// resolveListed reads one listed sidecar and resolves it; ok is false when it is gone.
func resolveListed(ctx context.Context, root storage.Store, l Listed, mode Mode, fence Fence) (Outcome, bool, error) {
	sc, ok, err := Read(ctx, root, l.Name)
	if err != nil || !ok {
		return Outcome{}, false, err // !ok: finished concurrently
	}
	if err := fence.Check(ctx, "resolving intent "+sc.OperationID); err != nil {
		return Outcome{}, false, err
	}
	var o Outcome
	switch sc.WriterKind {
	case BranchMerge:
		o, err = resolveMerge(ctx, root, sc, mode, fence)
	case Optimize:
		o, err = resolveOptimize(ctx, root, sc, fence)
	case Load, Mutation:
		o, err = resolveLoad(ctx, root, sc, mode, fence)
	case SchemaApply:
		o, err = resolveSchemaApply(ctx, root, sc, mode, fence)
	default:
		if mode == Full {
			return o, false, fmt.Errorf("recovery: sidecar %s is a %s intent, which this build cannot resolve", sc.OperationID, sc.WriterKind)
		}
		return Outcome{OperationID: sc.OperationID, Action: Deferred, Reason: string(sc.WriterKind) + " intents are not resolved by this build"}, true, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("recovery: sidecar %s: %w", sc.OperationID, err)
	}
	return o, true, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// resolveLoad runs the v9 Mutation/Load procedure for one sidecar.
func resolveLoad(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, fence Fence) (Outcome, error) {
	p3 := sc.ProtocolV3
	o, pub, st, done, err := openIntent(ctx, root, sc, mode, fence, p3.Lineage.GraphCommitID, p3.RollbackGraphCommitID,
		confirmedOutcomes(p3.IntendedDelta), p3.RollbackAuditOutcomes)
	if done || err != nil {
		return o, err
	}
	// Observe and classify every table.
	obs, err := observe(ctx, root, sc, st)
	if err != nil {
		return o, err
	}
	owned := false
	allForward := true
	for _, t := range obs {
		if t.class == InvariantViolation {
			return o, refuseState(t.pin.TableKey, false, ": Lance HEAD %d is behind its manifest pin %d (invariant violation); refusing", t.head, t.pinned)
		}
		owned = owned || t.ownAt != 0
		allForward = allForward && t.class == RolledPastExpected
	}
	if !owned {
		return retireLoad(ctx, root, sc, mode, o, pub, obs, fence)
	}
	// The captured authority must still hold for a roll-forward.
	holds, err := authorityHolds(ctx, root, pub, st, p3.Authority)
	if err != nil {
		return o, err
	}
	if allForward && holds {
		return rollForward(ctx, root, sc, pub, fence)
	}
	if mode == RollForwardOnly {
		o.Action = Deferred
		o.Reason = "this intent needs a rollback; reopen the graph read-write (worker recover) to resolve it"
		return o, nil
	}
	return rollBack(ctx, root, sc, pub, obs, fence)
}

// openIntent reads the intent's branch and settles the cases that need no table observed: a
// deleted branch (orphan discard) and a fixed outcome already visible (finalized). done says
// the intent is resolved (or failed) here; otherwise o, pub and st carry on.
func openIntent(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, fence Fence, commitID, rollbackID string,
	forward, back []TableOutcome) (o Outcome, pub *publisher.Publisher, st *publisher.State, done bool, err error) {
	branch := deref(sc.Branch)
	o = Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey(branch)}
	pub = publisher.Open(root, branch)
	st, err = pub.Snapshot(ctx)
	var bnf *errs.BranchNotFound
	switch {
	case errors.As(err, &bnf):
		o, err = discardOrphan(ctx, root, sc, fence)
		return o, nil, nil, true, err
	case err != nil:
		return o, nil, nil, true, err
	}
	for _, c := range []struct {
		id      string
		outcome string
		tables  []TableOutcome
	}{{commitID, RolledForward, forward}, {rollbackID, RolledBack, back}} {
		_, visible, err := st.Commit(ctx, c.id, 0)
		if err != nil {
			return o, nil, nil, true, err
		}
		if visible {
			o, err = finalize(ctx, root, sc, c.outcome, c.id, c.tables)
			return o, nil, nil, true, err
		}
	}
	return o, pub, st, false, nil
}

// retireLoad retires a load or mutation that no table carries. A full pass takes every
// planned version still free (take.go) and publishes the takes under the intent's pre-minted
// rollback commit, or, with nothing to take, simply discards the intent; the refs it created
// and never wrote are removed either way. The heal leaves it to a full pass.
func retireLoad(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, o Outcome, pub *publisher.Publisher, obs []*tableObs, fence Fence) (Outcome, error) {
	if mode == RollForwardOnly {
		return discardEffectless(ctx, root, sc, mode, o, nil)
	}
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	outcomes := []TableOutcome{}
	for _, t := range obs {
		switch {
		case t.taken:
			addPointer(&req, t.pin, t.ds, t.pinned)
		case t.takeable():
			if err := take(ctx, &req, sc.OperationID, t.pin, t.ds, fence); err != nil {
				return o, err
			}
		default:
			continue
		}
		outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: t.pinned, ToVersion: t.pinned})
	}
	forks := func() error { return removeUntouchedForks(ctx, root, obs) }
	if len(req.Updates) == 0 {
		return discardEffectless(ctx, root, sc, mode, o, forks)
	}
	if err := forks(); err != nil {
		return o, err
	}
	return publishRollback(ctx, root, sc, pub, fence, req, sc.ProtocolV3.RollbackGraphCommitID, outcomes)
}

// takeable says the table's planned version is still free, so a stale writer could commit it:
// the intent's own registered ref, HEAD at the pin, below the post-commit pin.
func (t *tableObs) takeable() bool {
	return t.ds != nil && !t.untouchedFork && !t.taken && t.head == t.pinned && t.head < t.pin.PostCommitPin
}

// discardEffectless retires an intent that no table carries and that took nothing: a full
// pass removes the refs it created (cleanup) and its sidecar, with no audit and no lineage;
// the heal leaves it.
func discardEffectless(ctx context.Context, root storage.Store, sc *Sidecar, mode Mode, o Outcome, cleanup func() error) (Outcome, error) {
	if mode == RollForwardOnly {
		o.Action, o.Reason = Deferred, "no table carries this intent's effect; a full recovery pass discards it"
		return o, nil
	}
	if err := cleanup(); err != nil {
		return o, err
	}
	if err := Delete(ctx, root, sc.OperationID); err != nil {
		return o, err
	}
	o.Action = Discarded
	return o, nil
}

// confirmedOutcomes are a roll-forward's audit outcomes: each confirmed slot, from its expected
// version to its confirmed one.
func confirmedOutcomes(d IntendedDelta) []TableOutcome {
	var out []TableOutcome
	for _, s := range d.TableUpdates {
		if s.Confirmed != nil {
			out = append(out, TableOutcome{TableKey: s.TableKey, FromVersion: s.ExpectedVersion, ToVersion: s.Confirmed.TableVersion})
		}
	}
	return out
}

// observe reads each pinned table's HEAD on its branch, the manifest pin, and who made the
// commits above the pin.
func observe(ctx context.Context, root storage.Store, sc *Sidecar, st *publisher.State) ([]*tableObs, error) {
	p3 := sc.ProtocolV3
	rootLoc := RootLocation(root)
	var out []*tableObs
	for i := range sc.Tables {
		t := &tableObs{pin: sc.Tables[i]}
		for j := range p3.IntendedDelta.TableUpdates {
			if p3.IntendedDelta.TableUpdates[j].Identity == t.pin.Identity {
				t.slot = &p3.IntendedDelta.TableUpdates[j]
			}
		}
		for j := range p3.Effects {
			if p3.Effects[j].Identity == t.pin.Identity {
				t.effect = &p3.Effects[j]
			}
		}
		registeredOnBranch := false
		if e, ok := st.Table(t.pin.TableKey); ok && e.Identity == t.pin.Identity {
			t.pinned = e.Version
			registeredOnBranch = e.Branch != nil && t.pin.TableBranch != nil && *e.Branch == *t.pin.TableBranch
		}
		rel, err := t.pin.relPath(rootLoc)
		if err != nil {
			return nil, err
		}
		ds, err := lance.Open(ctx, root.Sub(rel), lance.WithBranch(deref(t.pin.TableBranch)))
		var be *lance.BranchError
		switch {
		case errors.As(err, &be):
			t.head = t.pinned // a first-touch fork never created: nothing moved
			t.noRef = t.pin.TableBranch != nil
		case err != nil:
			return nil, err
		default:
			t.ds, t.head = ds, ds.Version()
			t.untouchedFork = t.pin.TableBranch != nil && !registeredOnBranch && t.head == t.pinned
		}
		t.rel = rel
		if t.ds != nil && t.head == t.pinned+1 && t.pinned == t.pin.ExpectedVersion {
			if t.taken, err = isTake(ctx, t.ds, t.head, sc.OperationID, t.pin.Identity, t.pinned); err != nil {
				return nil, err
			}
		}
		if t.ds != nil && t.head >= t.pin.PostCommitPin && t.effect != nil && !t.taken {
			if err := t.findOwnership(ctx); err != nil {
				return nil, err
			}
		}
		t.class = classify(sc, t)
		out = append(out, t)
	}
	return out, nil
}

// findOwnership looks for the planned transaction in the versions above the pin (bounded) and
// notices a compensating Restore right after it.
func (t *tableObs) findOwnership(ctx context.Context) error {
	const maxScan = 1026
	planned := t.effect.PlannedTransaction
	for v := t.pin.PostCommitPin; v <= t.head && v < t.pin.PostCommitPin+maxScan; v++ {
		txn, err := t.ds.ReadTransaction(ctx, v)
		if err != nil {
			return err
		}
		if txn.UUID == planned.UUID && txn.ReadVersion == planned.ReadVersion {
			t.ownAt = v
			if t.head == v+1 {
				top, err := t.ds.ReadTransaction(ctx, t.head)
				if err != nil {
					return err
				}
				t.restored = top.Op.Kind == lance.OpRestore && top.Op.RestoreVersion == t.pin.ExpectedVersion
			}
			return nil
		}
	}
	return nil
}

// classify applies the ExactEffect rules of a v9 Mutation/Load.
func classify(sc *Sidecar, t *tableObs) string { return classifyPhase(sc.ProtocolV3.EffectPhase, t) }

// classifyPhase applies the ExactEffect rules to one table of an exact intent in phase.
func classifyPhase(phase EffectPhase, t *tableObs) string {
	switch {
	case t.head < t.pinned:
		return InvariantViolation
	case t.head == t.pinned || t.taken:
		return NoMovement
	case t.pin.ExpectedVersion != t.pinned:
		return UnexpectedAtP1
	case phase != EffectsConfirmed || t.slot == nil || t.slot.Confirmed == nil || t.effect == nil || t.effect.ConfirmedTransaction == nil:
		return IncompletePhaseB
	case t.head != t.slot.Confirmed.TableVersion || t.pin.ConfirmedVersion == nil || *t.pin.ConfirmedVersion != t.head:
		return UnexpectedMultistep
	case t.ownAt != t.head:
		return UnexpectedEffectIdentity
	}
	return RolledPastExpected
}

// authorityHolds compares the captured token with the live one: branch identifier, exact graph
// head, accepted schema identity.
func authorityHolds(ctx context.Context, root storage.Store, pub *publisher.Publisher, st *publisher.State, a Authority) (bool, error) {
	err := pub.CheckExactHead(ctx, st, &publisher.ExactHead{Identifier: a.BranchIdentifier, Head: a.GraphHead})
	var moved *errs.ReadSetChanged
	if errors.As(err, &moved) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	raw, err := root.Get(ctx, pg.SchemaStateFile)
	if err != nil {
		return false, err
	}
	state, err := pg.ParseSchemaState(raw)
	if err != nil {
		return false, err
	}
	return state.IRHash == a.SchemaIRHash && state.Domain == a.SchemaIdentityDomain && state.IdentityVersion == a.SchemaIdentityVersion, nil
}

// rollForward publishes the confirmed delta under the original lineage while the captured
// token holds.
func rollForward(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence) (Outcome, error) {
	p3 := sc.ProtocolV3
	return publishForward(ctx, root, sc, pub, fence, p3.Lineage, p3.Authority, p3.IntendedDelta)
}

// publishForward is the roll-forward publish both exact protocols share: every confirmed slot
// verbatim (expected = the slot's expected version), the original lineage (id, actor, time,
// merged parent), ExactGraphHead on the captured token, and the sidecar's receipt.
func publishForward(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence, l Lineage, a Authority, d IntendedDelta) (Outcome, error) {
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{},
		Lineage: &publisher.Lineage{CommitID: l.GraphCommitID, ActorID: deref(l.ActorID), MergedParent: deref(l.MergedParentCommitID),
			CreatedAt: l.CreatedAt},
		Precondition: &publisher.ExactHead{Identifier: a.BranchIdentifier, Head: a.GraphHead},
		Receipt:      sc.IngestReceipt}
	for _, s := range d.TableUpdates {
		c := s.Confirmed
		req.Updates = append(req.Updates, publisher.DatasetUpdate{Identity: s.Identity, TableKey: s.TableKey, Version: c.TableVersion,
			Branch: c.TableBranch, RowCount: c.RowCount, Meta: c.VersionMetadata})
		req.Expected[s.Identity] = publisher.Expectation{TableKey: s.TableKey, Version: s.ExpectedVersion}
	}
	return publishAndFinalize(ctx, root, sc, pub, fence, req, forwardPoints, "roll forward", l.GraphCommitID, confirmedOutcomes(d))
}

// publishPoints are the failpoints around a recovery publish.
type publishPoints struct{ before, after, kind string }

var (
	forwardPoints  = publishPoints{"recovery.before_forward_publish", "recovery.after_forward_publish", RolledForward}
	rollbackPoints = publishPoints{"recovery.before_rollback_publish", "recovery.after_rollback_publish", RolledBack}
)

// publishAndFinalize is the end of every resolution that publishes (a roll forward of any
// intent, a rollback): the fence, the publish between its failpoints, then the audit row and
// the sidecar's removal. A pass that dies after the publish finds commitID visible and only
// finalizes.
func publishAndFinalize(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence, req publisher.Request,
	pts publishPoints, what, commitID string, outcomes []TableOutcome) (Outcome, error) {
	if err := failpoint.Inject(pts.before); err != nil {
		return Outcome{}, err
	}
	if err := fence.Check(ctx, "publish"); err != nil {
		return Outcome{}, err
	}
	if _, err := pub.Publish(ctx, req); err != nil {
		return Outcome{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := failpoint.Inject(pts.after); err != nil {
		return Outcome{}, err
	}
	return finalize(ctx, root, sc, pts.kind, commitID, outcomes)
}

// rollBack restores every owned effect to its pin and publishes the restored HEADs under the
// pre-minted rollback commit. A foreign or buried effect fails closed.
func rollBack(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, obs []*tableObs, fence Fence) (Outcome, error) {
	p3 := sc.ProtocolV3
	var outcomes []TableOutcome
	for _, t := range obs {
		if t.taken || t.takeable() {
			outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: t.pinned, ToVersion: t.pinned})
			continue
		}
		if t.head == t.pinned {
			continue
		}
		switch {
		case t.ownAt == 0:
			return Outcome{}, refuseState(t.pin.TableKey, true, " moved from %d to %d without this intent's transaction (foreign effect); refusing to restore through it", t.pinned, t.head)
		case t.ownAt != t.head && !t.restored:
			return Outcome{}, refuseState(t.pin.TableKey, true, ": this intent's effect at version %d is buried under HEAD %d; refusing to restore through it", t.ownAt, t.head)
		}
		from := t.head
		if t.restored {
			from = t.ownAt
		}
		outcomes = append(outcomes, TableOutcome{TableKey: t.pin.TableKey, FromVersion: from, ToVersion: t.pinned})
	}
	if outcomes == nil {
		outcomes = []TableOutcome{}
	}
	if p3.RollbackAuditOutcomes == nil {
		next := *sc
		np3 := *p3
		np3.RollbackAuditOutcomes = outcomes
		next.ProtocolV3 = &np3
		if err := Rewrite(ctx, root, &next, fence); err != nil {
			return Outcome{}, fmt.Errorf("persist the rollback plan: %w", err)
		}
		sc = &next
		p3 = sc.ProtocolV3
	}
	req := publisher.Request{Expected: map[ids.TableIdentity]publisher.Expectation{}}
	for _, t := range obs {
		var err error
		switch {
		case t.taken:
			addPointer(&req, t.pin, t.ds, t.pinned)
		case t.takeable():
			// A table the intent has not reached yet: its writer may still reach it.
			err = take(ctx, &req, sc.OperationID, t.pin, t.ds, fence)
		case t.head != t.pinned:
			err = restoreOwned(ctx, &req, t.pin, t.ds, t.pinned, t.restored, fence)
		}
		if err != nil {
			return Outcome{}, err
		}
	}
	// Forks this intent made but never wrote are removed before the rollback is published, so
	// a retry cannot strand them.
	if err := removeUntouchedForks(ctx, root, obs); err != nil {
		return Outcome{}, err
	}
	return publishRollback(ctx, root, sc, pub, fence, req, p3.RollbackGraphCommitID, p3.RollbackAuditOutcomes)
}

// restoreOwned compensates one owned effect: a Lance Restore to the pin (skipped when one
// already landed), added to req as the table's rollback pointer. The Restore also takes the
// version a stale writer would commit next (a merge chain's next step); one that got there
// first is errRaced.
func restoreOwned(ctx context.Context, req *publisher.Request, pin TablePin, ds *lance.Dataset, pinned uint64, restored bool, fence Fence) error {
	if !restored {
		if err := failpoint.Inject("recovery.before_restore"); err != nil {
			return err
		}
		if err := fence.Check(ctx, "restore "+pin.TableKey); err != nil {
			return err
		}
		staged, err := ds.StageRestore(ctx, pinned, lance.StageOptions{})
		if err != nil {
			return err
		}
		if ds, err = ds.Commit(ctx, staged); err != nil {
			return raced(fmt.Errorf("restore %s to %d: %w", pin.TableKey, pinned, err))
		}
		if err := failpoint.Inject("recovery.after_restore"); err != nil {
			return err
		}
	}
	addPointer(req, pin, ds, pinned)
	return nil
}

// publishRollback publishes the restored pointers under the pre-minted rollback commit (the
// recovery actor, the sidecar's start time) and finalizes with the durable audit plan.
func publishRollback(ctx context.Context, root storage.Store, sc *Sidecar, pub *publisher.Publisher, fence Fence, req publisher.Request, commitID string, outcomes []TableOutcome) (Outcome, error) {
	createdAt, ok := startedAt(sc)
	if !ok {
		createdAt = nowMicros()
	}
	req.Lineage = &publisher.Lineage{CommitID: commitID, ActorID: RecoveryActor, CreatedAt: createdAt}
	return publishAndFinalize(ctx, root, sc, pub, fence, req, rollbackPoints, "publish the rollback", commitID, outcomes)
}

func startedAt(sc *Sidecar) (int64, bool) {
	v, err := strconv.ParseInt(sc.StartedAt, 10, 64)
	return v, err == nil
}

// finalize records the audit row once and retires the sidecar.
func finalize(ctx context.Context, root storage.Store, sc *Sidecar, kind, commitID string, outcomes []TableOutcome) (Outcome, error) {
	o := Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey(deref(sc.Branch)), Action: kind, GraphCommitID: commitID, Tables: outcomes}
	if err := appendAudit(ctx, root, AuditRow{GraphCommitID: commitID, Kind: kind, ForActor: sc.ActorID, OperationID: sc.OperationID,
		WriterKind: string(sc.WriterKind), Outcomes: outcomes, CreatedAt: nowMicros()}); err != nil {
		return o, err
	}
	if err := Delete(ctx, root, sc.OperationID); err != nil {
		return o, err
	}
	return o, nil
}

// discardOrphan retires an intent whose branch no longer exists: a lineage-only commit on main
// by the recovery actor, audited as OrphanedBranchDiscarded.
func discardOrphan(ctx context.Context, root storage.Store, sc *Sidecar, fence Fence) (Outcome, error) {
	o := Outcome{OperationID: sc.OperationID, Branch: ids.BranchKey(deref(sc.Branch))}
	commit := ids.NewULID()
	if err := fence.Check(ctx, "publish"); err != nil {
		return o, err
	}
	if _, err := publisher.Open(root, "").Publish(ctx, publisher.Request{Lineage: &publisher.Lineage{CommitID: commit, ActorID: RecoveryActor, CreatedAt: nowMicros()}}); err != nil {
		return o, err
	}
	return finalize(ctx, root, sc, OrphanedBranchDiscarded, commit, nil)
}

// removeUntouchedForks deletes the first-touch branch refs an intent created on tables it
// never committed to (only valid while this process is the only writer).
func removeUntouchedForks(ctx context.Context, root storage.Store, obs []*tableObs) error {
	for _, t := range obs {
		if err := removeOwnRef(ctx, root, t.pin, t.rel, t.noRef, t.untouchedFork); err != nil {
			return err
		}
	}
	return nil
}

// removeOwnRef removes a table ref an intent created and that is unregistered: with noRef, only
// the tree a crash between Lance's clone and its ref left; with remove, the ref and its tree.
func removeOwnRef(ctx context.Context, root storage.Store, pin TablePin, rel string, noRef, remove bool) error {
	if !noRef && !remove || pin.TableBranch == nil {
		return nil
	}
	st, branch := root.Sub(rel), *pin.TableBranch
	if noRef {
		if err := lance.ReclaimBranchTree(ctx, st, branch); err != nil {
			return fmt.Errorf("reclaim the ref-less tree of %s on %s: %w", pin.TableKey, branch, err)
		}
		return nil
	}
	if err := failpoint.Inject("recovery.before_fork_cleanup"); err != nil {
		return err
	}
	err := lance.DeleteBranch(ctx, st, branch)
	var be *lance.BranchError
	if errors.As(err, &be) { // no ref: at most a tree a crash left between clone and ref
		err = lance.ReclaimBranchTree(ctx, st, branch)
	}
	if err != nil {
		return fmt.Errorf("remove the intent's ref of %s on %s: %w", pin.TableKey, branch, err)
	}
	return nil
}
