package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// Fence says whether this process is still the graph's single writer; see recovery.Fence.
type Fence = recovery.Fence

// FenceError is a write, recovery or cleanup step refused because the fence failed before it:
// the step wrote nothing. Before a write's sidecar is armed it is returned as it is; after,
// it is the reason of the write's RecoveryRequired.
type FenceError = recovery.FenceError

// SetFence makes f the fence of every write on g from now on: loads, merges and compaction
// check it before they arm recovery and before they publish; recovery (the heal at the entry
// of every write, and Recover) before it resolves each intent and before each publish;
// Cleanup before it starts and before it removes files; branch create and delete before they
// touch a branch ref. The fence belongs to the writer, not to a request: a leased worker sets
// it when it takes its lease, before its first recovery (and again with each new lease); nil
// fences nothing.
func (g *Graph) SetFence(f Fence) {
	g.writeMu.Lock()
	defer g.writeMu.Unlock()
	g.fence = f
}

// checkFence runs the writer's fence before step; the caller holds the write gate.
func (g *Graph) checkFence(ctx context.Context, step string) error {
	return g.fence.Check(ctx, step)
}

// forkOnto forks ds onto branch for a write's first touch of a table there. The fence is
// checked first: forks are the one effect recovery cannot take ahead of a writer that lost its
// lease (the ref does not exist yet), so that writer must not get this far. A ref already
// there is one the graph does not register (the first touch was planned from the manifest,
// under the write gate), left by a writer that died or lost its lease mid-write: invisible,
// so it is removed and the fork made again rather than stopping every later first touch.
func (g *Graph) forkOnto(ctx context.Context, ds *lance.Dataset, branch, key string) (*lance.Dataset, error) {
	if err := g.checkFence(ctx, "fork "+key+" onto "+branch); err != nil {
		return nil, err
	}
	forked, err := ds.CreateBranch(ctx, branch)
	var be *lance.BranchError
	if errors.As(err, &be) && be.Exists() {
		if derr := lance.DeleteBranch(ctx, ds.Store(), branch); derr != nil {
			return nil, fmt.Errorf("remove the unregistered ref of %s on %s: %w", key, branch, derr)
		}
		forked, err = ds.CreateBranch(ctx, branch)
	}
	return forked, err
}
