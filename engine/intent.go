// Package engine is the graph: schema contract, graph init and open, snapshots, and the writes
// that turn a request into exactly one graph commit (loads, branch merges, compaction).
//
// # The write protocol
//
// Every write that moves table HEADs runs one forward path, owned by this file (Graph.enter
// for steps 1-3, intent.run from step 5); the load (load.go), the merge (merge_effect.go) and
// the compaction (optimize.go) plug their own steps into it. In order:
//
//  1. lock: the write gate (Graph.writeMu), held to the end.
//  2. heal: roll-forward-only recovery of what a dead writer confirmed (Graph.heal); beside
//     it, the accepted schema is read and followed if another writer moved it
//     (Graph.followSchema). A load that prepares on the writer's held state and forks no
//     branch defers both to its revalidation, whose listing of __recovery stands for the
//     heal's: a sidecar listed there (or, before it, a refusal) heals and prepares again
//     (Graph.Load). So does the commit of a staged compaction, moved onto the held state
//     (Graph.CommitCompaction).
//  3. barrier: a pending sidecar on the branch refuses the write (Graph.recoveryBarrier),
//     checked when the write starts (unless the heal listed no sidecar at all) and again when
//     it revalidates its read set.
//  4. prepare (the writer's own): validate, plan and stage; nothing becomes visible.
//     Failpoints load.after_prepare, optimize.after_prepare.
//  5. fence: the writer's fence (Graph.SetFence) must still hold before anything is armed
//     (checked by the sidecar write, after its failpoint).
//  6. Phase A, arm: the v9 sidecar is written in state Armed (recovery.sidecar_write), while
//     the staged transaction files are written beside it (intent.stage): nothing references
//     either until a table commits. Failpoints load.after_sidecar, merge.after_arm,
//     optimize.after_sidecar.
//  7. Phase B, commit tables: every planned transaction is committed exactly at its planned
//     version. Failpoints load.after_fork, load.after_table_commit, merge.after_fork,
//     merge.after_chain_commit, optimize.after_table_commit.
//  8. confirm: the sidecar is rewritten as EffectsConfirmed with the exact committed
//     identities (recovery.sidecar_confirm); a load overlaps it with the staging of its
//     publish (intent.overlapConfirm). Optimize has no confirmation: a Rewrite changes no
//     row, so recovery keeps whatever landed; it stages its publish beside step 7 instead
//     (intent.overlapCommit), its tables' next manifests built before it armed. Failpoints
//     load.after_confirm, merge.after_confirm.
//  9. fence again (after the before_publish failpoint), then Phase C, publish: one __manifest commit with ExactGraphHead, the
//     expected table versions, the lineage and the receipt. Failpoints load.before_publish,
//     merge.before_publish, optimize.before_publish (then publisher.attempt,
//     publisher.before_commit), and load.after_publish, merge.after_publish,
//     optimize.after_publish.
//  10. Phase D, retire: the sidecar is deleted (recovery.sidecar_delete); a failure here only
//     leaves a sidecar whose outcome is visible, which the next heal finalizes. With
//     RetireInBackground (the serving worker) the write returns first and the deletion runs
//     beside the next one (retire.go).
//
// A load also folds its committed rows into the writer's in-memory id indexes, beside its
// publish; the fold is no step of the protocol (nothing outside the process reads the
// indexes) and may end after the write returns, before the next write reads them (fold.go).
//
// Sidecar states: absent (nothing armed), Armed (Phase A done; tables may have moved),
// EffectsConfirmed (Phase B done and recorded; recovery may roll forward), deleted (Phase D).
// An Optimize sidecar stays Armed until it is deleted.
// A failure before the sidecar is durable leaves only unreferenced files and is returned as
// it is; from then on every failure is exactly one *errs.RecoveryRequired naming the intent,
// made in one place (intent.required). The inverse path is recovery.Recover.
//
// A write that moves no table HEAD (an empty load, a pointer-only merge) arms nothing: it
// checks the fence and publishes (intent.run with no arm).
//
// The fence (fence.go) belongs to the writer, not to a request: a leased worker sets it with
// Graph.SetFence when it takes its lease. It is checked right before every effect, after the
// failpoint of the step before it, so that a writer paused anywhere resumes into a check: the
// sidecar write (step 6, inside recovery.Write), the table commits (step 7), the
// confirmation (inside recovery.Rewrite) and the publish (step 9); recovery (Graph.Recover,
// and the heal) checks it before each intent it resolves, before each restore, rewrite and
// publish; Cleanup before it starts and before each dataset's removals. A failed fence is a
// *FenceError, wrapped in the RecoveryRequired when it stops an armed write.
//
// The fence is a question to the lease's store, so a writer could still pause between its
// answer and the effect. Storage closes that window for the effects that matter: every table
// commit is at an exact version (put-if-absent), and recovery that discards or rolls back an
// intent takes the versions the intent planned (recovery.Recover), so a stale writer's late
// commit fails; every publish is a put-if-absent __manifest version under the expected table
// versions, so a late publish fails too (docs/fencing.md).
package engine

import (
	"cmp"
	"context"
	"sync"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/pg"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// enter is steps 1-3 of every write that may arm an intent: take the write gate, heal, and
// refuse while a sidecar is pending on any of branches (a merge checks its branches itself,
// after it has seen whether its receipt is already visible). On success the caller holds the
// gate and calls release when the write ends.
func (g *Graph) enter(ctx context.Context, branches ...string) (release func(), err error) {
	g.writeMu.Lock()
	if _, err := g.catchUp(ctx, branches...); err != nil {
		g.writeMu.Unlock()
		return nil, err
	}
	return g.writeMu.Unlock, nil
}

// catchUp is steps 2-3 for a write that holds the gate: follow the accepted schema, heal, and
// refuse while a sidecar is pending on any of branches. changed says it healed something or
// followed a schema, so that what was prepared before it is stale.
func (g *Graph) catchUp(ctx context.Context, branches ...string) (changed bool, err error) {
	_ = g.settleFolds() // a failed fold only dropped its tables from the cache
	// The accepted schema is read beside the heal's listing of __recovery, so following a
	// schema another writer applied costs no round trip of its own.
	type read struct {
		raw []byte
		err error
	}
	state := make(chan read, 1)
	go func() {
		raw, err := g.root.Get(ctx, pg.SchemaStateFile)
		state <- read{raw, err}
	}()
	was := g.Contract()
	pending, err := g.healPending(ctx)
	st := <-state
	if err != nil {
		return false, err
	}
	if st.err != nil {
		return false, st.err
	}
	if err := g.followSchema(ctx, st.raw); err != nil {
		return false, err
	}
	// With no sidecar listed by the heal, the barrier has nothing to refuse: listing again
	// would only cost a round trip to storage (a sidecar armed since by another process is
	// the revalidation's barrier to see, as one armed after this one would be).
	for _, b := range branches {
		if !pending {
			break
		}
		if err := g.recoveryBarrier(ctx, b); err != nil {
			return false, err
		}
	}
	return pending || g.Contract() != was, nil
}

// intentPoints are the failpoints the skeleton fires for one kind of write. Their names are
// part of the crash matrices and the README, so each writer spells them out in full.
type intentPoints struct {
	armed         string // after the sidecar is durable (and the staged files written)
	confirmed     string // after the EffectsConfirmed rewrite ("" with no confirmation)
	beforePublish string
	published     string
}

// intent is one write's forward path from the fence to the retirement of its sidecar. The
// writer fills in its steps; the skeleton orders them, checks the fence, fires the
// failpoints and turns every failure after arming into one RecoveryRequired.
type intent struct {
	g      *Graph
	points intentPoints
	// arm writes the sidecar (Phase A) and returns its operation id. nil: the write moves no
	// table HEAD and only publishes.
	arm func(context.Context) (string, error)
	// stage, when set, writes the staged transaction files while arm runs. A failure takes
	// the intent back (nothing moved).
	stage func(context.Context) error
	// check, when set, is the revalidation of a write prepared speculatively, run beside arm
	// and stage: nothing it guards moves before the table commits, so it need not come
	// first. A failure takes the intent back and is the write's error, for the writer to
	// prepare again; the listings it makes leave out the sidecar being armed (ownSidecar).
	check func(context.Context) error
	// commit is Phase B: every table's exact commits.
	commit func(context.Context) error
	// confirm rewrites the sidecar as EffectsConfirmed; nil for an intent without one.
	confirm func(context.Context) error
	// overlapConfirm runs confirm while publish stages its files: publish then calls the
	// gate it is given right before its __manifest commit. Otherwise the gate has already
	// passed when publish starts.
	overlapConfirm bool
	// overlapCommit, for an intent without confirmation whose publish names only versions
	// its commit makes at exactly planned versions (a compaction), runs commit while publish
	// stages its files too: the gate then waits for the commit first.
	overlapCommit bool
	// publish is Phase C. gate (the confirmation, the fence and their failpoints) must pass
	// before anything becomes visible; gate is nil when nothing was armed. The gate's error
	// is the publish's outcome whatever the publish returned, so a publish that keeps state
	// only once it landed asks the gate again after its commit.
	publish func(ctx context.Context, gate func() error) error
	// failed runs when the write ends in RecoveryRequired (forget cached state).
	failed func()
}

// run executes the forward path. The error is the writer's own before the sidecar is
// durable, and a *errs.RecoveryRequired after.
func (in *intent) run(ctx context.Context) error {
	g := in.g
	if in.arm == nil {
		if in.check != nil {
			if err := in.check(ctx); err != nil {
				return err
			}
		}
		if err := failpoint.Inject(in.points.beforePublish); err != nil {
			return err
		}
		if err := g.checkFence(ctx, "publish"); err != nil {
			return err
		}
		return in.publish(ctx, nil)
	}
	// The fence before arming is checked by the sidecar write itself, right before its put
	// (recovery.Write), so that a writer paused at the arm's failpoint arms nothing.
	staged, checked := make(chan error, 1), make(chan error, 1)
	beside := func(step func(context.Context) error, done chan<- error) {
		if step == nil {
			done <- nil
			return
		}
		done <- step(ctx)
	}
	go beside(in.stage, staged)
	go beside(in.check, checked)
	defer g.ownSidecar.Store("")
	opID, err := in.arm(ctx)
	serr, cerr := <-staged, <-checked
	if err != nil {
		if cerr != nil {
			return cerr // prepared on a state that moved: prepare again, then arm
		}
		return err // nothing moved: the sidecar is not durable
	}
	if failed := cmp.Or(serr, cerr); failed != nil {
		// Nothing moved either: take the intent back. Should that fail, recovery discards
		// it (an Armed intent without effects).
		if err := recovery.Delete(ctx, g.root, opID); err != nil {
			return in.required(opID, failed)
		}
		return failed
	}
	if err := failpoint.Inject(in.points.armed); err != nil {
		return in.required(opID, err)
	}
	// A writer paused since it armed may have lost its lease, and the new writer's recovery
	// may have taken this intent's table versions: commit nothing then.
	if err := g.checkFence(ctx, "commit tables"); err != nil {
		return in.required(opID, err)
	}
	// The table commits are heard of by nobody outside this process before the publish,
	// whose own write waits for their names to be durable: they need not wait themselves
	// (docs/durability.md).
	committed := make(chan error, 1)
	if in.overlapCommit {
		go func() { committed <- in.commit(storage.DeferDirSync(ctx)) }()
	} else if err := in.commit(storage.DeferDirSync(ctx)); err != nil {
		return in.required(opID, err)
	} else {
		committed <- nil
	}
	if err := in.confirmAndPublish(ctx, committed); err != nil {
		return in.required(opID, err)
	}
	if err := failpoint.Inject(in.points.published); err != nil {
		return in.required(opID, err)
	}
	// Phase D: a failure here only leaves a sidecar the next write's heal retires.
	g.retire(ctx, opID)
	return nil
}

// confirmAndPublish is the confirmation and Phase C, once committed gives Phase B's outcome.
// The gate is the one place the commit's and the confirmation's outcomes, the second fence
// and their failpoints meet: with overlapConfirm or overlapCommit the publish waits on it
// right before its commit, otherwise it passes before the publish.
func (in *intent) confirmAndPublish(ctx context.Context, committed <-chan error) error {
	confirmed := make(chan error, 1)
	switch {
	case in.confirm == nil:
		confirmed <- nil
	case in.overlapConfirm:
		go func() { confirmed <- in.confirm(ctx) }()
	default:
		confirmed <- in.confirm(ctx)
	}
	var gateErr error
	var once sync.Once
	gate := func() error {
		once.Do(func() {
			gateErr = cmp.Or(<-committed, <-confirmed)
			if gateErr == nil && in.confirm != nil {
				gateErr = failpoint.Inject(in.points.confirmed)
			}
			if gateErr == nil {
				gateErr = failpoint.Inject(in.points.beforePublish)
			}
			// The fence last: nothing between it and the publish may pause the writer.
			if gateErr == nil {
				gateErr = in.g.checkFence(ctx, "publish")
			}
		})
		return gateErr
	}
	if !in.overlapConfirm && !in.overlapCommit {
		if err := gate(); err != nil {
			return err
		}
	}
	err := in.publish(ctx, gate)
	// The commit's or the confirmation's failure first, then the publish's; this also waits
	// for an overlapped commit or confirmation whatever the publish did.
	if gerr := gate(); err == nil || gerr != nil {
		err = gerr
	}
	return err
}

// required is the single conversion of a failure after arming: the sidecar stays, and
// recovery (the heal, or worker recover) resolves it.
func (in *intent) required(opID string, err error) error {
	if in.failed != nil {
		in.failed()
	}
	in.g.unresolved.Store(true)
	return &errs.RecoveryRequired{OperationID: opID, Reason: err.Error()}
}
