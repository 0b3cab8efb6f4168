package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/lance"
	"github.com/omnigraph/omnigraph-worker/publisher"
	"github.com/omnigraph/omnigraph-worker/storage"
)

type harness struct {
	t      *testing.T
	g      *engine.Graph
	nc     *nats.Conn
	js     jetstream.JetStream
	w      *Worker
	events chan Event // commit events (committed, already_applied)
	// others are the events of the other outcomes (dead_lettered, held, empty), kept apart
	// so that tests reading commit events in order are not handed them.
	others chan Event
	stop   context.CancelFunc
	done   chan error
}

func start(t *testing.T, setup ...func(*Worker)) *harness {
	t.Helper()
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return startOn(t, ns.ClientURL(), setup...)
}

// startOn runs a worker on a fresh graph against the NATS server at url.
func startOn(t *testing.T, url string, setup ...func(*Worker)) *harness {
	t.Helper()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	root, err := storage.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src, _ := os.ReadFile("../graph/pg/testdata/example.pg")
	g, err := engine.Init(ctx, root, string(src))
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(nc, g, Config{Graph: "demo", AckWait: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(w)
	}
	h := &harness{t: t, g: g, nc: nc, w: w, events: make(chan Event, 16), others: make(chan Event, 64), done: make(chan error, 1)}
	h.js, _ = jetstream.New(nc)
	sub, err := nc.Subscribe(w.cfg.EventSubject(), func(m *nats.Msg) {
		var ev Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		switch ev.Outcome {
		case OutcomeCommitted, OutcomeAlreadyApplied:
			h.events <- ev
		default:
			select {
			case h.others <- ev:
			default: // a test that reads none of them
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	runCtx, cancel := context.WithCancel(ctx)
	h.stop = cancel
	go func() { h.done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(10 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return h
}

func (h *harness) publish(body string, hdr map[string]string) {
	h.t.Helper()
	m := nats.NewMsg(h.w.cfg.IngestSubject())
	m.Data = []byte(body)
	for k, v := range hdr {
		m.Header.Set(k, v)
	}
	// A minute, not the jetstream default of 5 s: some bodies are 32 MiB, and CI machines busy.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := h.js.PublishMsg(ctx, m); err != nil {
		h.t.Fatal(err)
	}
}

// outcomeWait bounds the wait for one outcome. It is generous because it is a bound, not a
// measure: a 32 MiB batch parsed under the race detector on a loaded two-core host has taken
// over 20 s to reach its dead letter.
const outcomeWait = 90 * time.Second

func (h *harness) event() Event {
	h.t.Helper()
	select {
	case ev := <-h.events:
		return ev
	case <-time.After(outcomeWait):
		h.t.Fatal("no commit event")
	}
	return Event{}
}

// other takes the next event of an outcome other than a commit.
func (h *harness) other() Event {
	h.t.Helper()
	select {
	case ev := <-h.others:
		return ev
	case <-time.After(outcomeWait):
		h.t.Fatal("no dead_lettered, held or empty event")
	}
	return Event{}
}

func (h *harness) deadLetter(reason string) jetstream.RawStreamMsg {
	h.t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(outcomeWait)
	for time.Now().Before(deadline) {
		s, err := h.js.Stream(ctx, h.w.cfg.DLQStream)
		if err == nil {
			if m, err := s.GetLastMsgForSubject(ctx, h.w.cfg.DLQSubject(reason)); err == nil {
				return *m
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("no dead letter on %s", h.w.cfg.DLQSubject(reason))
	return jetstream.RawStreamMsg{}
}

// export reads the graph through a handle of its own: the worker's compactor may be writing.
func (h *harness) export() string {
	var buf bytes.Buffer
	if err := h.reader().Export(context.Background(), "", 0, &buf); err != nil {
		h.t.Fatal(err)
	}
	return buf.String()
}

// reader opens the worker's graph read-only, for reads beside the running worker.
func (h *harness) reader() *engine.Graph {
	g, err := engine.OpenReadOnly(context.Background(), h.g.Root())
	if err != nil {
		h.t.Fatal(err)
	}
	return g
}

const batch = `{"type":"Person","data":{"handle":"alice","name":"Alice","active":true}}
{"type":"Company","data":{"domain":"acme.io","name":"Acme","size":"smb"}}
{"edge":"WorksAt","from":"alice","to":"acme.io","data":{"id":"w1"}}`

func TestCommitThenAckThenEvent(t *testing.T) {
	h := start(t)
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderActor: "pipeline", HeaderMsgID: "b-1"})
	ev := h.event()
	if ev.GraphCommitID == "" || ev.ManifestVersion != 2 || ev.SourceMsgID != "b-1" || ev.SourceSequence != 1 || ev.ActorID == nil || *ev.ActorID != "pipeline" {
		t.Fatalf("event %+v", ev)
	}
	if out := h.export(); !strings.Contains(out, "alice") || !strings.Contains(out, "acme.io") {
		t.Fatalf("export:\n%s", out)
	}
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("consumer %+v %v", info, err)
	}
	// The commit records which message it applied, down to the payload's digest.
	st, err := h.reader().Snapshot(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(batch))
	rc, ok, _ := st.Receipt(context.Background(), "b-1")
	if !ok || rc.Stream != h.w.cfg.Stream || rc.Sequence != 1 || rc.MsgID != "b-1" || rc.PayloadSHA256 != hex.EncodeToString(sum[:]) || rc.GraphCommitID != ev.GraphCommitID {
		t.Fatalf("receipt %+v %v", rc, ok)
	}
}

func TestPermanentFailuresAreDeadLettered(t *testing.T) {
	h := start(t)
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	// The same ids again as a strict insert: KeyConflict, with its fields in the detail.
	h.publish(`{"type":"Person","data":{"handle":"alice","name":"A","active":true}}`, map[string]string{HeaderMode: "append", "X-Trace": "t1"})
	m := h.deadLetter("key_conflict")
	if m.Header.Get(HeaderErrorKind) != "key_conflict" || m.Header.Get("X-Trace") != "t1" || m.Header.Get(HeaderOrigSeq) != "2" ||
		m.Header.Get(HeaderMsgID) != DeadLetterMsgID(h.w.cfg.Stream, h.w.streamCreated.Load(), 2) || h.w.streamCreated.Load() == 0 || !strings.Contains(m.Header.Get(HeaderErrorDetail), `"entity_id":"alice"`) ||
		!strings.Contains(string(m.Data), "alice") {
		t.Fatalf("dead letter %v %s", m.Header, m.Data)
	}
	// (A producer's own Omnigraph-Body-Omitted is not taken for a dead letter sent by reference.)
	h.publish(`{"type":"Nope","data":{}}`, map[string]string{HeaderBodyOmitted: "25"})
	if m := h.deadLetter("invalid"); !strings.Contains(m.Header.Get(HeaderError), "unknown node type 'Nope'") || m.Header.Get(HeaderBodyOmitted) != "" {
		t.Fatalf("invalid: %v", m.Header)
	}
	lines := make([]string, 8193)
	for i := range lines {
		lines[i] = `{"type":"Company","data":{"domain":"c` + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + itoa(i) + `.io","name":"C","size":"smb"}}`
	}
	h.publish(strings.Join(lines, "\n"), map[string]string{HeaderMode: "merge"})
	if m := h.deadLetter("resource_limit"); !strings.Contains(m.Header.Get(HeaderErrorDetail), `"limit":8192`) {
		t.Fatalf("resource limit: %v", m.Header)
	}
	h.publish(batch, map[string]string{HeaderBranch: "nosuch"})
	h.deadLetter("branch_missing")
	// Dead letters did not stop the stream: a good batch after them still commits.
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 6 {
		t.Fatalf("event %+v", ev)
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// A message whose commit is already visible (the crash window between publish and ack, or a
// roll-forward by recovery) is acknowledged without writing again.
func TestAlreadyVisibleBatchIsAckedWithoutWriting(t *testing.T) {
	h := start(t)
	recs, err := framing.ParseBytes([]byte(batch), framing.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	done, err := h.g.Load(context.Background(), engine.LoadRequest{Mode: engine.ModeAppend, Records: recs, Receipt: &publisher.Receipt{MsgID: "b-1"}})
	if err != nil {
		t.Fatal(err)
	}
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "b-1"})
	ev := h.event()
	if !ev.AlreadyApplied || ev.GraphCommitID != done.Commit.GraphCommitID {
		t.Fatalf("event %+v", ev)
	}
	cs, _ := h.reader().Commits(context.Background(), "")
	if len(cs) != 2 {
		t.Fatalf("%d commits, want genesis and the one load", len(cs))
	}
}

// Stop drains: Run returns after the in-flight message is acknowledged.
func TestDrainOnStop(t *testing.T) {
	h := start(t)
	h.publish(batch, nil)
	h.event()
	h.stop()
	select {
	case err := <-h.done:
		if err != nil {
			t.Fatal(err)
		}
		h.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after stop")
	}
}

// Two workers on one graph: the first holds the lease and commits; the second waits as a
// standby, takes over when the leader's lease lapses, and continues the stream; a write fenced
// by a lost lease does not commit.
func TestLeaseTakeover(t *testing.T) {
	h := start(t) // runs without a lease; stop it and run two leased workers instead
	h.stop()
	<-h.done
	h.done <- nil
	ctx := context.Background()
	ttl := 600 * time.Millisecond
	leader, err := AcquireLease(ctx, h.js, "demo", "leader", ttl, Replication{})
	if err != nil {
		t.Fatal(err)
	}
	standbyCtx, cancelStandby := context.WithCancel(ctx)
	defer cancelStandby()
	got := make(chan *Lease, 1)
	go func() {
		l, err := AcquireLease(standbyCtx, h.js, "demo", "standby", ttl, Replication{})
		if err == nil {
			got <- l
		}
	}()
	w1, _ := New(h.nc, h.g, Config{Graph: "demo", AckWait: 2 * time.Second}, nil)
	w1.UseLease(leader)
	run1, stop1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- w1.Run(run1) }()
	h.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 1 {
		t.Fatalf("event %+v", ev)
	}
	select {
	case <-got:
		t.Fatal("the standby acquired a held lease")
	case <-time.After(2 * ttl):
	}
	// The leader "dies": it stops renewing and never releases. Its consumer stops too.
	stop1()
	<-done1
	leader.markLost()
	var standby *Lease
	select {
	case standby = <-got:
	case <-time.After(10 * ttl):
		t.Fatal("the standby never took over")
	}
	if standby.Epoch() <= leader.Epoch() {
		t.Fatalf("epoch %d after %d", standby.Epoch(), leader.Epoch())
	}
	if err := leader.Check(ctx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("old leader's fence: %v", err)
	}
	w2, _ := New(h.nc, h.g, Config{Graph: "demo", AckWait: 2 * time.Second}, nil)
	w2.UseLease(standby)
	run2, stop2 := context.WithCancel(ctx)
	defer stop2()
	go func() { _ = w2.Run(run2) }()
	h.publish(`{"type":"Person","data":{"handle":"p2","name":"P","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 2 {
		t.Fatalf("event %+v", ev)
	}
	// A write fenced by the lost lease is refused before it arms anything.
	recs, _ := framing.ParseBytes([]byte(`{"type":"Person","data":{"handle":"p3","name":"P","active":true}}`), framing.DefaultLimits())
	stale, err := engine.OpenReadOnly(ctx, h.g.Root()) // the old leader's graph, fenced by its lease
	if err != nil {
		t.Fatal(err)
	}
	stale.SetFence(leader.Check)
	_, err = stale.Load(ctx, engine.LoadRequest{Mode: engine.ModeMerge, Records: recs})
	if !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("fenced write: %v", err)
	}
	if strings.Contains(h.export(), "p3") {
		t.Fatal("a write under a lost lease committed")
	}
}

func TestDeadLetterListAndReplay(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	// A strict re-insert dead-letters; replayed as merge it applies.
	h.publish(`{"type":"Person","data":{"handle":"alice","name":"Alice Two","active":true}}`, map[string]string{HeaderMode: "append"})
	h.deadLetter("key_conflict")
	dls, err := DeadLetters(ctx, h.js, h.w.cfg, "key_conflict")
	if err != nil || len(dls) != 1 || dls[0].OrigSeq != 2 || dls[0].Kind != "key_conflict" {
		t.Fatalf("list %+v %v", dls, err)
	}
	var lines []string
	res, err := Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: "key_conflict", Mode: "merge", DryRun: true}, func(s string) { lines = append(lines, s) })
	if err != nil || res.Replayed != 1 || res.Published != 1 || len(lines) != 1 {
		t.Fatalf("dry run %+v %v %v", res, err, lines)
	}
	res, err = Replay(ctx, h.js, h.w.cfg, ReplayOptions{Reason: "key_conflict", Mode: "merge"}, func(string) {})
	if err != nil || res.Replayed != 1 || res.Published != 1 {
		t.Fatalf("replay %+v %v", res, err)
	}
	h.event()
	if !strings.Contains(h.export(), "Alice Two") {
		t.Fatal("replayed batch not applied")
	}
	if dls, _ := DeadLetters(ctx, h.js, h.w.cfg, ""); len(dls) != 0 {
		t.Fatalf("dead letter not removed after its replay: %+v", dls)
	}
}

// Split puts node lines first, by the envelope: a node whose data says "edge" is a node, and
// a line that does not frame stays with the nodes. Parts respect the line and byte bounds.
func TestSplitBatchNodesFirst(t *testing.T) {
	edge := `{"edge":"E","from":"a","to":"b"}`
	nodeA := `{"type":"N","data":{"id":"a"}}`
	nodeB := `{"type":"N","data":{"id":"b","note":"edge","kind":{"edge":"E"}}}`
	broken := `{"edge":`
	body := []byte(edge + "\n" + nodeA + "\n\n" + broken + "\n" + nodeB + "\n")
	got := splitBatch(body, 2, 1<<20)
	want := []string{nodeA + "\n" + broken + "\n", nodeB + "\n" + edge + "\n"}
	if len(got) != len(want) || string(got[0]) != want[0] || string(got[1]) != want[1] {
		t.Fatalf("parts %q, want %q", got, want)
	}
	for _, p := range splitBatch(body, 100, len(nodeB)+len(edge)) {
		if len(p) > len(nodeB)+len(edge) {
			t.Fatalf("part of %d bytes over the bound", len(p))
		}
	}
}

func TestMetricsAndReadiness(t *testing.T) {
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) })
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	h.publish(`{"type":"Nope"}`, nil)
	h.deadLetter("invalid")
	deadline := time.Now().Add(5 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		out = exposition(m)
		if strings.Contains(out, `omnigraph_dead_letters_total{reason="invalid"} 1`) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{`omnigraph_messages_total{outcome="committed"} 1`, `omnigraph_dead_letters_total{reason="invalid"} 1`,
		"omnigraph_rows_total 3", "omnigraph_commit_seconds_count 1", `omnigraph_commit_seconds_bucket{le="+Inf"} 1`} {
		if !strings.Contains(out, want) {
			t.Fatalf("metrics lack %q:\n%s", want, out)
		}
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if r, err := http.Get(srv.URL + "/readyz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("readyz while consuming: %v %v", r, err)
	}
	h.stop()
	<-h.done
	h.done <- nil
	if r, err := http.Get(srv.URL + "/readyz"); err != nil || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz after stop: %v %v", r, err)
	}
	if r, err := http.Get(srv.URL + "/healthz"); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %v %v", r, err)
	}
}

// A message the server gave up on (MaxDeliver reached without an ack or a dead letter) is
// dead-lettered from the advisory.
func TestMaxDeliverAdvisoryDeadLetters(t *testing.T) {
	ctx := context.Background()
	h := start(t)
	h.stop() // no worker consumes: a stand-in below takes the deliveries and never acks
	<-h.done
	h.done <- nil
	if _, err := h.js.CreateOrUpdateConsumer(ctx, h.w.cfg.Stream, jetstream.ConsumerConfig{
		Durable: h.w.cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 300 * time.Millisecond,
		MaxDeliver: 2, MaxAckPending: 1, FilterSubject: h.w.cfg.IngestSubject()}); err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { _ = h.w.WatchMaxDeliveries(watchCtx) }()
	time.Sleep(100 * time.Millisecond)
	h.publish(`{"type":"Person","data":{"handle":"poison","name":"P","active":true}}`, map[string]string{"X-Trace": "p"})
	cons, _ := h.js.Consumer(ctx, h.w.cfg.Stream, h.w.cfg.Consumer)
	// Two deliveries, no ack (the "worker" died each time), then one more pull: the server
	// notices the exhausted message when it looks for the next one to deliver.
	for i := 0; i < 3; i++ {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
		}
		time.Sleep(400 * time.Millisecond)
	}
	m := h.deadLetter("max_deliver")
	if m.Header.Get(HeaderErrorKind) != "max_deliver" || m.Header.Get("X-Trace") != "p" || m.Header.Get(HeaderOrigSeq) != "1" || !strings.Contains(string(m.Data), "poison") {
		t.Fatalf("dead letter %v %s", m.Header, m.Data)
	}
}

// A held lease is renewed until Release, not until the context that acquired it ends: a worker
// told to stop keeps its lease while it finishes the commit in flight. Fence checks racing
// the renewals never see the lease as lost.
func TestLeaseOutlivesItsAcquireContext(t *testing.T) {
	h := start(t)
	ttl := 600 * time.Millisecond
	acquire, cancel := context.WithCancel(context.Background())
	l, err := AcquireLease(acquire, h.js, "other", "a", ttl, Replication{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	// Fence checks run back to back across a dozen renewals: none may take a renewal of our
	// own for another writer's, and the lease must not lapse.
	for end := time.Now().Add(4 * ttl); time.Now().Before(end); {
		if err := l.Check(context.Background()); err != nil {
			t.Fatalf("the lease was lost after its acquire context ended: %v", err)
		}
	}
	wait, stopWaiting := context.WithTimeout(context.Background(), 2*ttl)
	defer stopWaiting()
	if _, err := AcquireLease(wait, h.js, "other", "b", ttl, Replication{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second holder acquired a renewed lease: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(context.Background()); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("released lease still checks: %v", err)
	}
	next, stop := context.WithTimeout(context.Background(), ttl)
	defer stop()
	if _, err := AcquireLease(next, h.js, "other", "b", ttl, Replication{}); err != nil {
		t.Fatalf("a released lease is not free at once: %v", err)
	}
}

// Beside the messages the worker compacts full size-tier runs of fragments on main, as its own
// commits (no events, no effect on what the messages committed), so a long stream of small
// batches leaves a bounded number of fragments.
func TestWorkerCompactsBesideMessages(t *testing.T) {
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.CompactionFanout = 4 })
	const n = 9
	for i := 0; i < n; i++ {
		h.publish(fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}
{"type":"Company","data":{"domain":"c%d.io","name":"C","size":"smb"}}
{"edge":"WorksAt","from":"p%d","to":"c%d.io","data":{"id":"w%d"}}`, i, i, i, i, i), map[string]string{HeaderMode: "append"})
		if ev := h.event(); ev.Kind != "load" {
			t.Fatalf("event %+v", ev)
		}
	}
	out := h.export()
	if c := strings.Count(out, `"type":"Person"`); c != n {
		t.Fatalf("%d people exported, want %d:\n%s", c, n, out)
	}
	ctx := context.Background()
	// The compactor works beside the messages: wait until it has settled.
	var frags map[string]int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		frags = map[string]int{}
		st, err := h.reader().Snapshot(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		settled := !h.g.CompactionDue(4)
		for _, key := range []string{"node:Person", "node:Company", "edge:WorksAt"} {
			e, _ := st.Table(key)
			ds, err := lance.Open(ctx, h.g.Root().Sub(e.Path), lance.AtVersion(e.Version))
			if err != nil {
				t.Fatal(err)
			}
			frags[key] = ds.NumFragments()
			settled = settled && ds.NumFragments() <= 4
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fragments %v after %d one-row batches at fanout 4", frags, n)
		}
	}
	if c := strings.Count(h.export(), `"type":"Person"`); c != n {
		t.Fatalf("%d people exported after compaction, want %d", c, n)
	}
	commits, err := h.reader().Commits(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	compactions := 0
	for _, c := range commits {
		if c.ActorID != nil && *c.ActorID == CompactionActor {
			compactions++
		}
	}
	if out := exposition(m); compactions < 2 || !strings.Contains(out, fmt.Sprintf(`omnigraph_compactions_total{result="ok"} %d`, compactions)) {
		t.Fatalf("%d compaction commits; metrics:\n%s", compactions, out)
	}
}

// A compaction that keeps failing is tried once, then left alone for a while: the messages go
// on, each without a failed attempt in front of it.
func TestFailedCompactionPauses(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("optimize.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.CompactionFanout = 2 })
	const n = 6
	for i := 0; i < n; i++ {
		h.publish(fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	if out := exposition(m); !strings.Contains(out, `omnigraph_compactions_total{result="failed"} 1`) || !strings.Contains(out, `omnigraph_compactions_total{result="ok"} 0`) {
		t.Fatalf("want exactly one failed compaction over %d messages:\n%s", n, out)
	}
	if c := strings.Count(h.export(), `"type":"Person"`); c != n {
		t.Fatalf("%d people committed, want %d", c, n)
	}
}

// A staged compaction whose fragments a message changed meanwhile (an upsert of a row in its
// run) is dropped as stale, and the next is done in the writer's turn, so a stream that keeps
// upserting rows of the newest fragments cannot keep them from being compacted: here every
// upsert changes the newest fragment, faster than a staging completes.
func TestStaleCompactionIsDoneInline(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	// Hold every staged compaction long enough for several upserts to commit under it.
	if err := failpoint.Enable("compaction.after_stage", "sleep(1500)"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.CompactionFanout = 2 })
	for i := range 2 {
		h.publish(person(i), map[string]string{HeaderMode: "append"})
		h.event()
	}
	metrics := func() string { return exposition(m) }
	done := false
	for k := 0; k < 40 && !done; k++ {
		h.publish(fmt.Sprintf(`{"type":"Person","data":{"handle":"p1","name":"Renamed %d","active":true}}`, k), map[string]string{HeaderMode: "merge"})
		h.event()
		done = regexp.MustCompile(`omnigraph_compactions_total\{result="ok"\} [1-9]`).MatchString(metrics())
		time.Sleep(150 * time.Millisecond)
	}
	if !done || !regexp.MustCompile(`omnigraph_compactions_total\{result="stale"\} [1-9]`).MatchString(metrics()) {
		t.Fatalf("want a stale compaction, then one done while the upserts go on; metrics:\n%s", metrics())
	}
	out := h.export()
	if strings.Count(out, `"handle":"p1"`) != 1 || strings.Count(out, `"type":"Person"`) != 2 {
		t.Fatalf("after the compactions:\n%s", out)
	}
}
