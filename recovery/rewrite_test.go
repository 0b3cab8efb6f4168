package recovery

import (
	"context"
	"errors"
	"testing"

	"github.com/omnigraph/omnigraph-worker/storage"
)

// A rewrite takes only over the body its writer last saw: a writer that lost its lease (here,
// one that armed the intent and froze) can neither overwrite the rollback plan the new
// writer's recovery wrote nor re-create the sidecar that recovery removed.
func TestRewriteIsConditional(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			zombie := armedFor(t, st)
			if err := Write(ctx, st, zombie, nil); err != nil {
				t.Fatal(err)
			}
			// The new writer's recovery reads the armed intent and records its rollback plan.
			seen, ok, err := Read(ctx, st, FileName(zombie.OperationID))
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			plan := *seen
			p3 := *seen.ProtocolV3
			p3.RollbackAuditOutcomes = []TableOutcome{}
			plan.ProtocolV3 = &p3
			if err := Rewrite(ctx, st, &plan, nil); err != nil {
				t.Fatalf("the reader's rewrite: %v", err)
			}
			planBody, _, _ := st.GetIfExists(ctx, Key(zombie.OperationID))

			wantMoved(t, Rewrite(ctx, st, confirmOf(t, zombie), nil))
			if now, _, _ := st.GetIfExists(ctx, Key(zombie.OperationID)); string(now) != string(planBody) {
				t.Fatalf("the stale confirmation replaced the rollback plan:\n%s", now)
			}
			// A second rewrite of the plan's holder goes on from its own last write.
			again := plan
			if err := Rewrite(ctx, st, &again, nil); err != nil {
				t.Fatalf("a rewrite over this writer's own last write: %v", err)
			}

			if err := Delete(ctx, st, zombie.OperationID); err != nil {
				t.Fatal(err)
			}
			wantMoved(t, Rewrite(ctx, st, confirmOf(t, zombie), nil))
			if l, err := List(ctx, st); err != nil || len(l) != 0 {
				t.Fatalf("the stale confirmation re-created the removed sidecar: %v %v", l, err)
			}

			if err := Rewrite(ctx, st, armedFor(t, st), nil); err == nil {
				t.Fatal("a rewrite of a sidecar never written nor read here was accepted")
			}
		})
	}
}

func wantMoved(t *testing.T, err error) {
	t.Helper()
	var fe *FenceError
	if !errors.As(err, &fe) || !errors.Is(err, ErrSidecarMoved) || fe.Step != "rewrite the sidecar" {
		t.Fatalf("want a *FenceError wrapping ErrSidecarMoved, got %v", err)
	}
	if !errors.Is(err, storage.ErrChanged) && !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("the refusal hides the store's reason: %v", err)
	}
}
