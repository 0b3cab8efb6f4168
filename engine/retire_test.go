package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// retiringGraph is a test graph that retires its sidecars in the background, the deletions
// meeting the failpoint action deletion.
func retiringGraph(t *testing.T, deletion string) *Graph {
	t.Helper()
	g := testGraph(t)
	g.RetireInBackground()
	if err := failpoint.Enable(recovery.FailpointDelete, deletion); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	return g
}

// A background deletion that fails leaves its sidecar in view once it ended: the next write
// heals it, and what both writes loaded is there.
func TestFailedBackgroundRetireIsHealedByTheNextWrite(t *testing.T) {
	ctx := context.Background()
	g := retiringGraph(t, "1*error")
	loadInto(t, g, "", "", "append", person("a", "A"))
	g.WaitRetired()
	if l, err := recovery.List(ctx, g.root); err != nil || len(l) != 1 {
		t.Fatalf("after a failed background deletion: %v %v, want its sidecar", l, err)
	}
	loadInto(t, g, "", "", "append", person("b", "B"))
	g.WaitRetired()
	noSidecars(t, g)
	out := export(t, g, "")
	for _, h := range []string{"a", "b"} {
		if !strings.Contains(out, `"handle":"`+h+`"`) {
			t.Fatalf("%s missing:\n%s", h, out)
		}
	}
}

// A load returns while its sidecar is still being deleted; the next load neither refuses nor
// heals over it; full recovery waits for the deletion and so finds nothing to do.
func TestBackgroundRetireOverlapsTheNextWrite(t *testing.T) {
	ctx := context.Background()
	// Each deletion waits 2 s: the checks below run well within it.
	g := retiringGraph(t, "2*sleep(2000)")
	loadInto(t, g, "", "", "append", person("a", "A"))
	if l, err := recovery.List(ctx, g.root); err != nil || len(l) != 1 {
		t.Fatalf("right after the load: %v %v, want its sidecar still there", l, err)
	}
	loadInto(t, g, "", "", "append", person("b", "B"))
	if l, err := g.listPending(ctx); err != nil || len(l) != 0 {
		t.Fatalf("the writer's own listing shows %v %v while it retires them", l, err)
	}
	out, err := g.Recover(ctx)
	if err != nil || len(out) != 0 {
		t.Fatalf("recovery over sidecars being retired: %v %v, want nothing to do", out, err)
	}
	noSidecars(t, g)
}
