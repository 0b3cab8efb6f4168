package engine

import (
	"context"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/graph/ids"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// armedSidecar is the live recovery intent of one load.
type armedSidecar struct {
	g  *Graph
	sc *recovery.Sidecar
}

func (a *armedSidecar) operationID() string { return a.sc.OperationID }

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// arm is Phase A: the identity-bearing v9 Load sidecar, written before any table moves.
func (g *Graph) arm(ctx context.Context, req *LoadRequest, p *prepared, commitID string, createdAt int64) (*armedSidecar, error) {
	state := g.Contract().State
	spec := recovery.LoadSpec{
		Root:    g.rootLoc,
		Branch:  ids.BranchPtr(req.Branch),
		ActorID: optString(req.Actor),
		Authority: recovery.Authority{BranchIdentifier: p.identifier, GraphHead: p.head, SchemaIdentityDomain: state.Domain,
			SchemaIRHash: state.IRHash, SchemaIdentityVersion: state.IdentityVersion},
		Lineage: recovery.Lineage{GraphCommitID: commitID, Branch: ids.BranchPtr(req.Branch), ActorID: optString(req.Actor), CreatedAt: createdAt},
	}
	for _, t := range p.tables {
		branch := t.entry.Branch
		if t.firstTouch {
			branch = ids.BranchPtr(req.Branch)
		}
		spec.Tables = append(spec.Tables, recovery.PlannedTable{Identity: t.identity(), TableKey: t.key, ExpectedVersion: t.entry.Version,
			TableBranch: branch, Transaction: recovery.Transaction{ReadVersion: t.entry.Version, UUID: t.uuid}})
	}
	sc, err := recovery.NewLoadSidecar(spec)
	if err != nil {
		return nil, err
	}
	sc.IngestReceipt = req.Receipt
	g.ownSidecar.Store(sc.OperationID)
	if err := recovery.Write(ctx, g.root, sc, g.fence); err != nil {
		return nil, err
	}
	return &armedSidecar{g: g, sc: sc}, nil
}

// confirm rewrites the sidecar as EffectsConfirmed with the exact committed identities and the
// manifest delta the publish will make.
func (a *armedSidecar) confirm(ctx context.Context, p *prepared) error {
	var updates []publisher.DatasetUpdate
	committed := map[ids.TableIdentity]recovery.Transaction{}
	for _, t := range p.tables {
		updates = append(updates, tableUpdate(t))
		committed[t.identity()] = recovery.Transaction{ReadVersion: t.entry.Version, UUID: t.uuid}
	}
	next, err := a.sc.Confirm(updates, committed)
	if err != nil {
		return err
	}
	if err := recovery.Rewrite(ctx, a.g.root, next, a.g.fence); err != nil {
		return err
	}
	a.sc = next
	return nil
}

// heal is the roll-forward-only recovery at the entry of every write: confirmed intents whose
// authority still holds are finished and visible outcomes finalized; nothing is restored. The
// fence is checked per pending intent, so a heal with nothing to do costs no fence check.
func (g *Graph) heal(ctx context.Context) error {
	_, err := g.healPending(ctx)
	return err
}

// healPending is heal that also reports whether any sidecar was listed: a write that starts
// with none needs no barrier check of its own, which saves a listing of __recovery per write.
func (g *Graph) healPending(ctx context.Context) (pending bool, err error) {
	listed, err := g.listPending(ctx)
	if err != nil || len(listed) == 0 {
		return false, err
	}
	// Recovery lists __recovery again and would retire beside them the sidecars this process
	// is deleting: let those deletions end first.
	g.WaitRetired()
	_, err = recovery.Recover(ctx, g.root, recovery.RollForwardOnly, g.fence)
	if rerr := g.reloadContract(ctx); err == nil {
		err = rerr
	}
	return true, err
}

// reloadContract reads the accepted schema again after recovery, which may have finished a
// schema apply.
func (g *Graph) reloadContract(ctx context.Context) error {
	c, err := loadContract(ctx, g.root)
	if err != nil {
		return err
	}
	if c.State.IRHash != g.Contract().State.IRHash {
		g.contract.Store(c)
	}
	return nil
}

// Recover runs full recovery: every pending intent is rolled forward or back. It is what a
// read-write open does, what `worker recover` runs, and what a worker runs after a write
// returned RecoveryRequired. It restores tables and publishes, so it is fenced like a write:
// a failed fence refuses it up front (a *FenceError, nothing written), and recovery checks
// the fence again before each intent and each publish.
func (g *Graph) Recover(ctx context.Context) ([]recovery.Outcome, error) {
	g.lockSettled()
	defer g.writeMu.Unlock()
	g.WaitRetired()
	if err := g.checkFence(ctx, "recovery"); err != nil {
		return nil, err
	}
	out, err := recovery.Recover(ctx, g.root, recovery.Full, g.fence)
	if err == nil {
		g.unresolved.Store(false)
	}
	g.tables = map[tableRef]*tableState{} // restored tables are re-read on next use
	if rerr := g.reloadContract(ctx); err == nil {
		err = rerr
	}
	return out, err
}

// recoveryBarrier refuses a write while a recovery intent on its branch (or a schema-apply
// intent) is still pending after the heal.
func (g *Graph) recoveryBarrier(ctx context.Context, branch string) error {
	listed, err := g.listPending(ctx)
	if err != nil {
		return err
	}
	for _, l := range listed {
		sc, ok, err := recovery.Read(ctx, g.root, l.Name)
		if err != nil {
			return err
		}
		if !ok {
			continue // finished between list and read
		}
		if sc.Branch == nil && branch == "" || sc.Branch != nil && *sc.Branch == branch || sc.WriterKind == recovery.SchemaApply {
			return &errs.RecoveryRequired{OperationID: sc.OperationID,
				Reason: "a pending recovery sidecar covers this branch; reopen the graph read-write (worker recover) to resolve it"}
		}
	}
	return nil
}
