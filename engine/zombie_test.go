package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// A zombie is a writer that passed its fence and then paused (a long GC, SIGSTOP, a
// partition) while another writer took over. These tests put the pause right after a fence
// check, the one window the lease cannot close, and show that storage closes it: the new
// writer's recovery takes the versions the zombie planned, so the zombie's late effects fail
// and leave nothing that stops the new writer.

// pausingFence passes its first n-1 checks; the n-th blocks until resume is closed and then
// passes too (the zombie's check answered "still yours" just before it froze); every later
// check fails, as the lease is gone by then.
func pausingFence(n int) (f Fence, paused <-chan struct{}, resume chan<- struct{}) {
	p, r := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64 // a write's forks check the fence side by side
	return func(context.Context) error {
		switch c := calls.Add(1); {
		case c == int64(n):
			close(p)
			<-r
		case c > int64(n):
			return errLeaseGone
		}
		return nil
	}, p, r
}

var errLeaseGone = errors.New("lease lost")

// zombieLoad starts the load req on g whose fence pauses at its n-th check, and waits for the
// pause.
func zombieLoad(t *testing.T, g *Graph, n int, req LoadRequest) (resume func() error) {
	t.Helper()
	fence, paused, release := pausingFence(n)
	g.SetFence(fence)
	done := make(chan error, 1)
	go func() {
		_, err := g.Load(context.Background(), req)
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("the load ended before its pause: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the load never reached its pause")
	}
	return func() error {
		close(release)
		return <-done
	}
}

// batchReq is the batch both writers are given: the zombie first, the new writer on its
// redelivery, recognised by its receipt if the zombie's commit was rolled forward.
func batchReq(t *testing.T) LoadRequest {
	return LoadRequest{Mode: ModeAppend, Records: records(t, people...), Receipt: &publisher.Receipt{Stream: "S", Sequence: 7, MsgID: "m-7"}}
}

// writeAsWorker loads req as the serving worker does: a RecoveryRequired (an intent someone
// left) is resolved by a full recovery and the message tried again.
func writeAsWorker(t *testing.T, g *Graph, req LoadRequest) {
	t.Helper()
	for i := 0; ; i++ {
		_, err := g.Load(context.Background(), req)
		var rr *errs.RecoveryRequired
		if err == nil {
			return
		}
		if !errors.As(err, &rr) || i == 3 {
			t.Fatalf("the new writer's load: %v", err)
		}
		if _, err := g.Recover(context.Background()); err != nil {
			t.Fatalf("the new writer's recovery: %v", err)
		}
	}
}

// takeOver is the new writer: it opens the graph read-write (full recovery) and commits.
func takeOver(t *testing.T, g *Graph) *Graph {
	t.Helper()
	b, err := Open(context.Background(), g.root)
	if err != nil {
		t.Fatalf("the new writer's open: %v", err)
	}
	return b
}

func TestZombieLoadCommitsNothingAfterTakeover(t *testing.T) {
	for _, c := range []struct {
		name  string
		pause int // the fence check the zombie freezes after: 1 arm, 2 commit tables, 3 confirm
	}{
		{"after the arm check", 1},
		{"after the commit check", 2},
		{"after the confirm check", 3},
		{"after the publish check", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			a := testGraph(t)
			smallLoads(t, a, "", "p", 2)
			before := export(t, a, "")
			resume := zombieLoad(t, a, c.pause, batchReq(t))
			// The new writer recovers, then the zombie resumes before the new writer writes
			// anything (the batch's redelivery waits for its ack wait).
			b := takeOver(t, a)
			recovered := export(t, b, "")
			err := resume()
			var rr *errs.RecoveryRequired
			if err == nil {
				t.Fatal("the zombie's load succeeded after the takeover")
			}
			if c.pause > 1 && !errors.As(err, &rr) {
				t.Fatalf("the zombie's armed load: want RecoveryRequired, got %v", err)
			}
			// Nothing of the zombie's is visible, and nothing stops the new writer: its next
			// writes resolve whatever the zombie left and commit.
			if got := export(t, b, ""); got != recovered {
				t.Fatalf("the zombie changed the graph:\n%s\n---\n%s", recovered, got)
			}
			writeAsWorker(t, b, batchReq(t))
			writeAsWorker(t, b, LoadRequest{Mode: ModeAppend, Records: records(t, `{"type":"Person","data":{"handle":"after","name":"After","active":true}}`)})
			if _, err := b.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			noSidecars(t, b)
			tablesAligned(t, b)
			if got, want := strings.Count(export(t, b, ""), "\n"), strings.Count(before, "\n")+len(people)+1; got != want {
				t.Fatalf("%d rows, want %d: the batch must be there exactly once", got, want)
			}
		})
	}
}

// A compaction's zombie: its Rewrites find their versions taken.
func TestZombieCompactionCommitsNothingAfterTakeover(t *testing.T) {
	a := testGraph(t)
	smallLoads(t, a, "", "p", 3)
	fence, paused, release := pausingFence(2) // after the commit check
	a.SetFence(fence)
	done := make(chan error, 1)
	go func() {
		_, err := a.Optimize(context.Background(), OptimizeOptions{All: true})
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("the compaction ended before its pause: %v", err)
	}
	b := takeOver(t, a)
	before := export(t, b, "")
	close(release)
	var rr *errs.RecoveryRequired
	if err := <-done; !errors.As(err, &rr) {
		t.Fatalf("the zombie's compaction: want RecoveryRequired, got %v", err)
	}
	writeAsWorker(t, b, batchReq(t))
	noSidecars(t, b)
	tablesAligned(t, b)
	if got, want := strings.Count(export(t, b, ""), "\n"), strings.Count(before, "\n")+len(people); got != want {
		t.Fatalf("%d rows, want %d", got, want)
	}
	if l, err := recovery.List(context.Background(), b.root); err != nil || len(l) != 0 {
		t.Fatalf("sidecars: %v %v", l, err)
	}
}

// A merge's zombie: its chain finds its first version taken.
func TestZombieMergeCommitsNothingAfterTakeover(t *testing.T) {
	a := testGraph(t)
	loadInto(t, a, "", "", "append", people...)
	loadInto(t, a, "stage", "main", "append", `{"type":"Person","data":{"handle":"staged","name":"Staged","active":true}}`,
		`{"type":"Company","data":{"domain":"staged.io","name":"Staged","size":"smb"}}`)
	loadInto(t, a, "", "", "append", `{"type":"Person","data":{"handle":"main2","name":"Main2","active":true}}`,
		`{"type":"Company","data":{"domain":"main2.io","name":"Main2","size":"smb"}}`)
	fence, paused, release := pausingFence(2) // after the commit check
	a.SetFence(fence)
	done := make(chan error, 1)
	go func() {
		_, err := a.Merge(context.Background(), MergeRequest{Source: "stage", Target: "main"})
		done <- err
	}()
	select {
	case <-paused:
	case err := <-done:
		t.Fatalf("the merge ended before its pause: %v", err)
	}
	b := takeOver(t, a)
	recovered := sortedExport(t, b, "")
	close(release)
	var rr *errs.RecoveryRequired
	if err := <-done; !errors.As(err, &rr) {
		t.Fatalf("the zombie's merge: want RecoveryRequired, got %v", err)
	}
	if got := sortedExport(t, b, ""); got != recovered {
		t.Fatalf("the zombie changed main:\n%s\n---\n%s", recovered, got)
	}
	if _, err := b.Merge(context.Background(), MergeRequest{Source: "stage", Target: "main"}); err != nil {
		t.Fatalf("the new writer's merge after the zombie resumed: %v", err)
	}
	noSidecars(t, b)
	tablesAligned(t, b)
	if got := sortedExport(t, b, ""); !strings.Contains(got, `"handle":"staged"`) || !strings.Contains(got, `"handle":"main2"`) {
		t.Fatalf("after the merge:\n%s", got)
	}
}

// A branch load's zombie: a fork onto the branch is the one effect recovery cannot take ahead
// of it (the ref does not exist yet). Frozen after its commit check, it resumes into the fork's
// own check and forks nothing; frozen after that check, it resumes and forks one table (an
// unregistered ref), which must not stop the new writer's first touch of that table.
func TestZombieBranchForkDoesNotStopTheNewWriter(t *testing.T) {
	for _, c := range []struct {
		name  string
		pause int
		forks int // unregistered stage refs the zombie leaves
	}{
		{"after the commit check", 2, 0},
		{"after a fork check", 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			a := testGraph(t)
			smallLoads(t, a, "", "p", 2)
			if err := a.CreateBranch(ctx, "stage", "main"); err != nil {
				t.Fatal(err)
			}
			req := batchReq(t)
			req.Branch = "stage"
			resume := zombieLoad(t, a, c.pause, req)
			b := takeOver(t, a)
			recovered := export(t, b, "stage")
			if err := resume(); err == nil {
				t.Fatal("the zombie's load succeeded after the takeover")
			}
			if got := export(t, b, "stage"); got != recovered {
				t.Fatalf("the zombie changed the branch:\n%s\n---\n%s", recovered, got)
			}
			if got := stageRefs(t, b); got != c.forks {
				t.Fatalf("the zombie left %d stage refs, want %d", got, c.forks)
			}
			writeAsWorker(t, b, req)
			if _, err := b.Recover(ctx); err != nil {
				t.Fatal(err)
			}
			noSidecars(t, b)
			if got, want := strings.Count(export(t, b, "stage"), "\n"), strings.Count(recovered, "\n")+len(people); got != want {
				t.Fatalf("%d rows on stage, want %d", got, want)
			}
		})
	}
}

// stageRefs counts the Lance refs named stage under g's tables (not __manifest's own).
func stageRefs(t *testing.T, g *Graph) int {
	t.Helper()
	objs, err := g.root.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, o := range objs {
		if strings.HasSuffix(o.Key, "/_refs/branches/stage.json") && !strings.HasPrefix(o.Key, "__manifest/") {
			n++
		}
	}
	return n
}
