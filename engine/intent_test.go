package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
)

// fakeIntent is an intent whose steps only record what ran; its sidecar is a real one (an
// Optimize intent on node:Person), so arming and retiring are the skeleton's own.
type fakeIntent struct {
	in                           *intent
	sc                           *recovery.Sidecar
	armErr, stageErr, commitErr  error
	confirmErr, publishErr       error
	commits, publishes, failures int
	committed                    bool // the fake publish got past its gate
	gateSeen                     bool // the publish was handed a gate
	armed                        bool
}

var testPoints = intentPoints{armed: "test.intent.armed", confirmed: "test.intent.confirmed",
	beforePublish: "test.intent.before_publish", published: "test.intent.published"}

func newFakeIntent(t *testing.T, g *Graph, overlap bool) *fakeIntent {
	t.Helper()
	e := mustTable(t, g, "node:Person")
	sc, err := recovery.NewOptimizeSidecar(g.rootLoc, nil, []recovery.OptimizeTable{{Identity: e.Identity, TableKey: e.TableKey, ExpectedVersion: e.Version}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeIntent{sc: sc}
	f.in = &intent{g: g, points: testPoints, overlapConfirm: overlap,
		arm: func(ctx context.Context) (string, error) {
			if f.armErr != nil {
				return "", f.armErr
			}
			f.armed = true
			return sc.OperationID, recovery.Write(ctx, g.root, sc, g.fence)
		},
		stage:   func(context.Context) error { return f.stageErr },
		commit:  func(context.Context) error { f.commits++; return f.commitErr },
		confirm: func(context.Context) error { return f.confirmErr },
		publish: func(_ context.Context, gate func() error) error {
			f.publishes++
			f.gateSeen = gate != nil
			if gate != nil {
				if err := gate(); err != nil {
					return err // a gated publish commits nothing
				}
			}
			if f.publishErr != nil {
				return f.publishErr
			}
			f.committed = true
			return nil
		},
		failed: func() { f.failures++ },
	}
	return f
}

func pendingSidecars(t *testing.T, g *Graph) int {
	t.Helper()
	l, err := recovery.List(context.Background(), g.root)
	if err != nil {
		t.Fatal(err)
	}
	return len(l)
}

// Failures before the sidecar is durable come back as they are; every failure after it is
// exactly one RecoveryRequired naming the intent, with the sidecar left for recovery.
func TestIntentSkeletonFailures(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	boom := errors.New("boom")
	lost := errors.New("lease lost")
	cases := []struct {
		name     string
		overlap  bool
		set      func(f *fakeIntent, g *Graph)
		raw      error // a failure returned as it is (nothing armed, or taken back)
		reason   string
		pending  int  // sidecars left
		commited bool // the publish went through
	}{
		{name: "arm fails", set: func(f *fakeIntent, _ *Graph) { f.armErr = boom }, raw: boom},
		{name: "fence before arming", set: func(_ *fakeIntent, g *Graph) { g.fence = func(context.Context) error { return lost } }, raw: lost},
		{name: "stage fails, intent taken back", set: func(f *fakeIntent, _ *Graph) { f.stageErr = boom }, raw: boom},
		{name: "armed failpoint", set: func(*fakeIntent, *Graph) { _ = failpoint.Enable(testPoints.armed, "1*error") }, reason: "injected", pending: 1},
		{name: "commit fails", set: func(f *fakeIntent, _ *Graph) { f.commitErr = boom }, reason: "boom", pending: 1},
		{name: "confirm fails", set: func(f *fakeIntent, _ *Graph) { f.confirmErr = boom }, reason: "boom", pending: 1},
		{name: "overlapped confirm fails", overlap: true, set: func(f *fakeIntent, _ *Graph) { f.confirmErr = boom }, reason: "boom", pending: 1},
		{name: "fence before the table commits", set: func(_ *fakeIntent, g *Graph) {
			calls := 0
			g.fence = func(context.Context) error { // the arm's check, then the commits'
				if calls++; calls == 2 {
					return lost
				}
				return nil
			}
		}, reason: "fenced before commit tables", pending: 1},
		{name: "fence before publish", overlap: true, set: func(_ *fakeIntent, g *Graph) {
			calls := 0
			g.fence = func(context.Context) error {
				if calls++; calls == 3 {
					return lost
				}
				return nil
			}
		}, reason: "fenced before publish", pending: 1},
		{name: "before-publish failpoint", set: func(*fakeIntent, *Graph) { _ = failpoint.Enable(testPoints.beforePublish, "1*error") }, reason: "injected", pending: 1},
		{name: "publish fails", overlap: true, set: func(f *fakeIntent, _ *Graph) { f.publishErr = boom }, reason: "boom", pending: 1},
		{name: "after-publish failpoint", set: func(*fakeIntent, *Graph) { _ = failpoint.Enable(testPoints.published, "1*error") }, reason: "injected", pending: 1, commited: true},
		{name: "success", overlap: true, set: func(*fakeIntent, *Graph) {}, commited: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			failpoint.Reset()
			g := testGraph(t)
			f := newFakeIntent(t, g, c.overlap)
			c.set(f, g)
			err := f.in.run(context.Background())
			var rr *errs.RecoveryRequired
			switch {
			case c.raw != nil:
				if !errors.Is(err, c.raw) || errors.As(err, &rr) || f.failures != 0 || f.publishes != 0 {
					t.Fatalf("want %v as it is, got %v (failures %d, publishes %d)", c.raw, err, f.failures, f.publishes)
				}
			case c.reason != "":
				if !errors.As(err, &rr) || rr.OperationID != f.sc.OperationID || !strings.Contains(rr.Reason, c.reason) {
					t.Fatalf("want one RecoveryRequired for %s (%q), got %v", f.sc.OperationID, c.reason, err)
				}
				if strings.Contains(rr.Reason, "recovery required") || f.failures != 1 {
					t.Fatalf("converted %d times: %v", f.failures, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := pendingSidecars(t, g); got != c.pending {
				t.Fatalf("%d sidecars left, want %d", got, c.pending)
			}
			if f.committed != c.commited {
				t.Fatalf("publish committed: %v, want %v", f.committed, c.commited)
			}
			if f.commits > 0 && !f.armed {
				t.Fatal("a table committed before the sidecar was armed")
			}
			if f.publishes > 0 && !f.gateSeen {
				t.Fatal("an armed intent's publish got no gate")
			}
		})
	}
}

// An intent that moves no table HEAD arms nothing: one fence check, then the publish, ungated.
func TestIntentWithoutArm(t *testing.T) {
	g := testGraph(t)
	checks := 0
	g.fence = func(context.Context) error { checks++; return nil }
	published := false
	in := &intent{g: g, points: testPoints, publish: func(_ context.Context, gate func() error) error {
		published = gate == nil
		return nil
	}}
	if err := in.run(context.Background()); err != nil || !published || checks != 1 {
		t.Fatalf("err %v, published ungated %v, fence checks %d", err, published, checks)
	}
	lost := errors.New("lease lost")
	g.fence = func(context.Context) error { return lost }
	published = false
	var fe *FenceError
	if err := in.run(context.Background()); !errors.As(err, &fe) || fe.Step != "publish" || !errors.Is(err, lost) || published {
		t.Fatalf("a lost fence: %v (published %v)", err, published)
	}
}
