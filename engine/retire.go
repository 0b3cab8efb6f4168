package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/omnigraph/omnigraph-worker/recovery"
)

// Phase D, the deletion of a write's sidecar once its publish is visible, changes nothing a
// reader or a later write can see: a sidecar whose outcome is published is only retired by
// whoever meets it. A serving writer therefore need not wait for it (RetireInBackground): the
// write returns once its publish is visible, the deletion runs beside the next write's first
// requests, and this process's own listings of __recovery leave out the sidecars it is still
// deleting, so that the next write neither heals nor refuses over one. On an object store that
// is one sequential round trip fewer per write (docs/object-store-latency.md).
//
// A deletion that fails puts its sidecar back in view: the next write's heal retires it, as it
// did when the write itself ignored a failed Phase D. Writes that must see __recovery as it is
// (full recovery, cleanup, drift restore) first wait for the deletions under way.

// retireTimeout bounds one background deletion: it outlives the write whose context ended.
const retireTimeout = time.Minute

// retires are the sidecars this process deletes in the background: by operation id, a
// channel closed when the deletion ended.
type retires struct {
	on       atomic.Bool
	mu       sync.Mutex
	inFlight map[string]chan struct{}
}

// RetireInBackground makes every write of g return once its publish is visible, its sidecar
// deleted beside what comes next (see above). WaitRetired waits for the deletions under way.
func (g *Graph) RetireInBackground() { g.retires.on.Store(true) }

// WaitRetired returns once every background sidecar deletion started before the call has
// ended. It may be called from any goroutine, beside writes.
func (g *Graph) WaitRetired() {
	r := &g.retires
	r.mu.Lock()
	var done []chan struct{}
	for _, c := range r.inFlight {
		done = append(done, c)
	}
	r.mu.Unlock()
	for _, c := range done {
		<-c
	}
}

// retire is Phase D of the intent opID: in the background with RetireInBackground, else now.
// A failure only leaves a sidecar the next write's heal retires.
func (g *Graph) retire(ctx context.Context, opID string) {
	r := &g.retires
	if !r.on.Load() {
		_ = recovery.Delete(ctx, g.root, opID)
		return
	}
	done := make(chan struct{})
	r.mu.Lock()
	if r.inFlight == nil {
		r.inFlight = map[string]chan struct{}{}
	}
	r.inFlight[opID] = done
	r.mu.Unlock()
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retireTimeout)
		defer cancel()
		_ = recovery.Delete(ctx, g.root, opID)
		r.mu.Lock()
		delete(r.inFlight, opID)
		r.mu.Unlock()
	}()
}

// retiring are the operation ids being deleted in the background now.
func (r *retires) retiring() map[string]struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.inFlight) == 0 {
		return nil
	}
	out := make(map[string]struct{}, len(r.inFlight))
	for id := range r.inFlight {
		out[id] = struct{}{}
	}
	return out
}

// listPending lists __recovery without the sidecars this process was deleting in the
// background when the listing began (one whose deletion ends meanwhile is not mistaken for a
// pending intent, and one whose deletion fails is seen by the next listing) and without the
// one the write under way is arming beside this listing (intent.check).
func (g *Graph) listPending(ctx context.Context) ([]recovery.Listed, error) {
	skip := g.retires.retiring()
	listed, err := recovery.List(ctx, g.root)
	if err != nil {
		return nil, err
	}
	own, _ := g.ownSidecar.Load().(string)
	if len(skip) == 0 && own == "" {
		return listed, nil
	}
	return slices.DeleteFunc(listed, func(l recovery.Listed) bool {
		id := strings.TrimSuffix(l.Name, ".json")
		_, ok := skip[id]
		return ok || id == own
	}), nil
}
