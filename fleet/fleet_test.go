package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/ingest"
)

const ttl = time.Second

func startServer(t *testing.T) string {
	ns, err := ingest.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// member is one process of a fleet: its own connection, its Fleet running until stopped.
type member struct {
	f      *Fleet
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan error
}

// holdLease serves a graph as `worker run` would as far as the fleet can tell: it takes the
// graph's lease, is ready while it holds it, and releases it when stopped.
func holdLease(nc *nats.Conn, holder string) Serve {
	return func(ctx context.Context, graph string, m *ingest.Metrics) error {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		l, err := ingest.AcquireLease(ctx, js, graph, holder, ttl, ingest.Replication{})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		m.SetLease(true)
		m.SetReady(true)
		defer func() { m.SetReady(false); m.SetLease(false) }()
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = l.Release(rctx)
			return nil
		case <-l.Lost():
			return ingest.ErrLeaseLost
		}
	}
}

func join(t *testing.T, url, name string, graphs []string, serve func(nc *nats.Conn) Serve, opts ...Opt) *member {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	if serve == nil {
		serve = func(nc *nats.Conn) Serve { return holdLease(nc, name) }
	}
	f, err := New(nc, Config{ID: "test", Member: name, Graphs: graphs, TTL: ttl}, serve(nc), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{f: f, nc: nc, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- f.Run(ctx) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop leaves the fleet as SIGTERM does.
func (m *member) stop(t *testing.T) {
	if m.cancel == nil {
		return
	}
	m.cancel()
	if err := <-m.done; err != nil {
		t.Errorf("%s: Run: %v", m.f.cfg.Member, err)
	}
	m.cancel = nil
	m.nc.Close()
}

// crash ends the member as SIGKILL would, as far as the others can tell: its connection goes
// first, so it neither deletes its heartbeat nor releases a lease.
func (m *member) crash() {
	m.nc.Close()
	m.cancel()
	<-m.done
	m.cancel = nil
}

// waitSpread waits until the members serve every graph between them, each as many as want
// says, and returns who serves what.
func waitSpread(t *testing.T, members []*member, want []int, within time.Duration) map[string]string {
	t.Helper()
	var last string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		owner := map[string]string{}
		ok, dup := true, false
		var report []string
		for i, m := range members {
			st := m.f.Status()
			report = append(report, fmt.Sprintf("%s %v", st.Member, st.Serving))
			ok = ok && len(st.Serving) == want[i]
			for _, g := range st.Serving {
				dup = dup || owner[g] != ""
				owner[g] = st.Member
			}
		}
		last = strings.Join(report, "; ")
		if ok && !dup && len(owner) == len(members[0].f.cfg.Graphs) {
			return owner
		}
	}
	t.Fatalf("graphs not spread %v within %v: %s", want, within, last)
	return nil
}

// TestFleetSpreadsMovesAndGivesBack: three members over six graphs serve two each; one
// crashes and the two others take its graphs once its heartbeat and leases expire; it comes
// back and gets its share again, given back by the others.
func TestFleetSpreadsMovesAndGivesBack(t *testing.T) {
	url := startServer(t)
	graphs := names("g", 6)
	ms := []*member{join(t, url, "a", graphs, nil), join(t, url, "b", graphs, nil), join(t, url, "c", graphs, nil)}
	before := waitSpread(t, ms, []int{2, 2, 2}, 20*time.Second)

	crashed := time.Now()
	ms[2].crash()
	after := waitSpread(t, ms[:2], []int{3, 3}, 20*time.Second)
	t.Logf("c's graphs served by the others %v after it crashed (TTL %v)", time.Since(crashed).Round(time.Millisecond), ttl)
	for g, owner := range before {
		if owner != "c" && after[g] != owner {
			t.Logf("%s moved from %s to %s", g, owner, after[g])
		}
	}

	ms[2] = join(t, url, "c", graphs, nil)
	again := waitSpread(t, ms, []int{2, 2, 2}, 20*time.Second)
	if fmt.Sprint(again) != fmt.Sprint(before) {
		t.Fatalf("the same members assign differently: %v then %v", before, again)
	}

	// A member that leaves (SIGTERM) deletes its heartbeat: the others take over without
	// waiting for it to expire, and its leases are released.
	ms[0].stop(t)
	waitSpread(t, ms[1:], []int{3, 3}, 20*time.Second)
}

// TestFleetHTTP: /readyz says which graphs the process serves, /metrics labels every graph's
// series and the fleet's gauges with the graph.
func TestFleetHTTP(t *testing.T) {
	url := startServer(t)
	m := join(t, url, "solo", []string{"a", "b"}, nil)
	waitSpread(t, []*member{m}, []int{2}, 20*time.Second)
	srv := httptest.NewServer(m.f.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	code, body := get("/readyz")
	if code != 200 || !strings.Contains(body, `"serving":["a","b"]`) || !strings.Contains(body, `"members":["solo"]`) {
		t.Fatalf("/readyz: %d %s", code, body)
	}
	_, body = get("/metrics")
	for _, want := range []string{`omnigraph_fleet_graph_served{graph="a"} 1`, `omnigraph_fleet_graph_assigned{graph="b"} 1`,
		`omnigraph_lease_held{graph="a"} 1`, `omnigraph_rows_total{graph="b"} 0`, "omnigraph_fleet_members 1", "# TYPE go_goroutines gauge",
		`omnigraph_dead_letters_total{graph="b",reason="max_deliver"} 0`, `omnigraph_lease_acquisitions_total{graph="a"} 0`,
		`omnigraph_commit_lag_seconds_count{graph="a"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// The process's build once, beside the graphs' series.
	if n := strings.Count(body, "\nomnigraph_build_info{"); n != 1 {
		t.Errorf("omnigraph_build_info %d times", n)
	}
}

// TestFleetFailedGraph: a graph whose service fails is reported (503 with the reason) and
// tried again later, the other graphs served meanwhile; an error WithFatal names ends Run.
func TestFleetFailedGraph(t *testing.T) {
	url := startServer(t)
	var mu sync.Mutex
	tries := 0
	flaky := func(nc *nats.Conn) Serve {
		hold := holdLease(nc, "solo")
		return func(ctx context.Context, graph string, m *ingest.Metrics) error {
			if graph == "a" {
				mu.Lock()
				tries++
				n := tries
				mu.Unlock()
				if n == 1 {
					return errors.New("storage: unwell")
				}
			}
			return hold(ctx, graph, m)
		}
	}
	m := join(t, url, "solo", []string{"a", "b"}, flaky)
	var st Status
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st = m.f.Status(); st.Failed["a"] != "" {
			break
		}
	}
	if st.Failed["a"] != "storage: unwell" || st.Ready() {
		t.Fatalf("status after a's failure: %+v", st)
	}
	waitSpread(t, []*member{m}, []int{2}, 20*time.Second)
	if st := m.f.Status(); !st.Ready() || len(st.Failed) != 0 {
		t.Fatalf("status once a runs again: %+v", st)
	}

	fatal := errors.New("refused for good")
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f, err := New(nc, Config{ID: "other", Member: "x", Graphs: []string{"z"}, TTL: ttl},
		func(context.Context, string, *ingest.Metrics) error { return fatal },
		WithFatal(func(err error) bool { return errors.Is(err, fatal) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := f.Run(ctx); !errors.Is(err, fatal) {
		t.Fatalf("Run: %v, want the fatal error", err)
	}
	if slices.Contains(f.Status().Serving, "z") {
		t.Fatal("z served after Run returned")
	}
}

// TestFleetNames: names that cannot be heartbeat keys or subject tokens are refused.
func TestFleetNames(t *testing.T) {
	url := startServer(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var ne *NameError
	if _, err := New(nc, Config{ID: "a.b", Graphs: []string{"g"}}, nil); !errors.As(err, &ne) {
		t.Fatalf("fleet a.b: %v", err)
	}
	if _, err := New(nc, Config{Member: "h:1", Graphs: []string{"g"}}, nil); !errors.As(err, &ne) {
		t.Fatalf("member h:1: %v", err)
	}
	var ge *ingest.GraphNameError
	if _, err := New(nc, Config{Graphs: []string{"g.1"}}, nil); !errors.As(err, &ge) {
		t.Fatalf("graph g.1: %v", err)
	}
	if DefaultID([]string{"b", "a", "a"}) != DefaultID([]string{"a", "b"}) || DefaultID([]string{"a"}) == DefaultID([]string{"a", "b"}) {
		t.Fatal("DefaultID depends on more than the set of graphs")
	}
}
