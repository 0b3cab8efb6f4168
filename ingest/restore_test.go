package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// recreatedCount is omnigraph_streams_recreated_total{what}.
func recreatedCount(m *Metrics, what string) int {
	return int(testutil.ToFloat64(m.recreatedC.WithLabelValues(what)))
}

// waitThere waits until JetStream has the worker's ingest, dead-letter and events streams and
// its consumer.
func (h *harness) waitThere() {
	h.t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if lacking, err := h.w.missing(ctx); err == nil && len(lacking) == 0 {
			return
		}
	}
	lacking, err := h.w.missing(ctx)
	h.t.Fatalf("the worker did not make its streams and consumer again: missing %v %v", lacking, err)
}

// committed waits for the commit event of the message whose id is msgID, skipping the
// events of messages redelivered and recognised as applied.
func (h *harness) committed(msgID string) Event {
	h.t.Helper()
	for {
		ev := h.event()
		if ev.SourceMsgID == msgID && !ev.AlreadyApplied {
			return ev
		}
	}
}

// A stream or the consumer deleted under a running worker (by an operator, or with the
// broker's store) is made again with the worker's own settings, logged and counted, and the
// worker goes on: what is published afterwards commits, its event lands in the events stream,
// a dead letter in the dead-letter stream.
func TestRecreatesDeletedStreamsAndConsumer(t *testing.T) {
	for _, d := range []int{1, 4} {
		t.Run(fmt.Sprintf("depth%d", d), func(t *testing.T) { recreatesDeleted(t, d) })
	}
}

// observed makes a worker count in m and log everything to the returned logs.
func observed(m *Metrics) (func(*Worker), *observer.ObservedLogs) {
	core, logs := observer.New(zapcore.DebugLevel)
	return func(w *Worker) {
		w.UseMetrics(m)
		w.base = zap.New(core).With(zap.String("graph", "demo"))
		w.log = w.base
	}, logs
}

func recreatesDeleted(t *testing.T, depthN int) {
	ctx := context.Background()
	m := NewMetrics()
	observe, logs := observed(m)
	h := start(t, observe, func(w *Worker) {
		w.cfg.StreamMaxBytes = 64 << 20 // a setting of the worker's own, which a re-created stream keeps
		// JetStream may refuse a stream made again right after its deletion ("error creating
		// store"): the retries that follow come within the test's waits.
		w.cfg.RetryMax = 500 * time.Millisecond
	}, depth(depthN))
	for _, what := range recreatable {
		if n := recreatedCount(m, what); n != 0 {
			t.Fatalf("%s re-created %d times before anything was lost", what, n)
		}
	}
	h.publish(batch, map[string]string{HeaderMsgID: "b-1"})
	h.committed("b-1")

	steps := []struct {
		what   string
		delete func() error
		want   map[string]int // counts after this step
	}{
		{"consumer", func() error { return h.js.DeleteConsumer(ctx, h.w.cfg.Stream, h.w.cfg.Consumer) },
			map[string]int{"consumer": 1}},
		{"stream", func() error { return h.js.DeleteStream(ctx, h.w.cfg.Stream) },
			map[string]int{"consumer": 2, "stream": 1}},
		{"events_stream", func() error { return h.js.DeleteStream(ctx, h.w.cfg.EventsStream) },
			map[string]int{"consumer": 2, "stream": 1, "events_stream": 1}},
		{"dlq_stream", func() error { return h.js.DeleteStream(ctx, h.w.cfg.DLQStream) },
			map[string]int{"consumer": 2, "stream": 1, "events_stream": 1, "dlq_stream": 1}},
	}
	for i, s := range steps {
		if err := s.delete(); err != nil {
			t.Fatalf("delete %s: %v", s.what, err)
		}
		h.waitThere()
		id := fmt.Sprintf("b-%d", i+2)
		h.publish(fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i), map[string]string{HeaderMsgID: id})
		h.committed(id)
		for _, what := range recreatable {
			if got := recreatedCount(m, what); got != s.want[what] {
				t.Fatalf("after deleting the %s: %s re-created %d times, want %d\nlogs: %v", s.what, what, got, s.want[what], logs.All())
			}
		}
	}
	// The event of the last batch is in the re-created events stream.
	h.eventStored()
	// A dead letter lands in the re-created dead-letter stream.
	h.publish(`{"type":"Nope","data":{}}`, map[string]string{HeaderMsgID: "bad"})
	h.deadLetter("invalid")
	// Each re-creation is logged at warn, naming what and with the configured settings.
	recs := logs.FilterMessageSnippet("re-created what JetStream no longer had").All()
	if len(recs) == 0 {
		t.Fatalf("no re-creation logged: %v", logs.All())
	}
	for _, e := range recs {
		if e.Level != zapcore.WarnLevel || e.ContextMap()["recreated"] == nil || e.ContextMap()["cause"] == nil {
			t.Fatalf("re-creation logged as %v %v", e.Level, e.ContextMap())
		}
	}
	s, err := h.js.Stream(ctx, h.w.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.CachedInfo().Config; c.MaxBytes != 64<<20 || len(c.Subjects) != len(h.w.cfg.consumed()) {
		t.Fatalf("re-created stream's config %+v, want the worker's settings", c)
	}
	if st := m.Status(); !st.Ready || st.Held() != "" {
		t.Fatalf("status %+v after the re-creations", st)
	}
}

// A deletion whose advisory never reaches the worker (JetStream queues it on the deleted
// stream's own sender and sometimes never sends it) is found by the worker's periodic look
// and made again: here the events stream, which no write notices.
func TestRecreatesADeletionNoAdvisoryAnnounced(t *testing.T) {
	ctx := context.Background()
	m := NewMetrics()
	observe, logs := observed(m)
	h := start(t, observe)
	h.publish(batch, map[string]string{HeaderMsgID: "b-0"})
	h.committed("b-0")
	if err := failpoint.Enable("ingest.deletion_advisory", "error"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(failpoint.Reset)
	if err := h.js.DeleteStream(ctx, h.w.cfg.EventsStream); err != nil {
		t.Fatal(err)
	}
	h.waitThere()
	if got := recreatedCount(m, "events_stream"); got != 1 {
		t.Fatalf("events stream re-created %d times, want 1", got)
	}
	recs := logs.FilterMessageSnippet("re-created what JetStream no longer had").All()
	if len(recs) != 1 || !strings.Contains(fmt.Sprint(recs[0].ContextMap()["cause"]), "no deletion advisory came") {
		t.Fatalf("re-creation logged as %v", recs)
	}
	h.publish(batch, map[string]string{HeaderMsgID: "b-1"})
	h.committed("b-1")
	h.eventStored()
}

// eventStored waits until the events stream holds an event. The test's subscriber can see an
// event before the stream has stored it, so the stream is asked until it has.
func (h *harness) eventStored() {
	h.t.Helper()
	ctx := context.Background()
	evs, err := h.js.Stream(ctx, h.w.cfg.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	var last error
	if poll(func() bool {
		_, last = evs.GetLastMsgForSubject(ctx, h.w.cfg.EventSubject())
		return last == nil
	}) {
		return
	}
	// What the stream held then: this wait timed out once, in a CI run's race pass, and not in
	// the twenty runs after it (under -race, some beside two busy cores); whether the stream
	// JetStream has is the one the worker made, and whether it took anything, tells the cause.
	info, err := h.js.Stream(ctx, h.w.cfg.EventsStream)
	state := fmt.Sprintf("lookup: %v", err)
	if err == nil {
		i := info.CachedInfo()
		state = fmt.Sprintf("created %s, subjects %v, %d messages, last sequence %d", i.Created, i.Config.Subjects, i.State.Msgs, i.State.LastSeq)
	}
	h.t.Fatalf("timed out waiting for the event in the re-created events stream (last lookup: %v); the stream: %s", last, state)
}

// startJetStream starts an in-process server on port (-1: a free one) storing under dir, with
// JetStream on and its file store limited to maxStore bytes, or off (maxStore 0).
func startJetStream(t *testing.T, dir string, port int, maxStore int64) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: maxStore > 0, StoreDir: dir,
		JetStreamMaxStore: maxStore, MaxPayload: MaxMessageBytes, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		t.Fatal("NATS not ready")
	}
	return ns
}

// readyBody is /readyz's status and body.
func (r *running) readyBody() (int, string) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitHeld waits until /readyz answers 503 with a body holding every want, and returns when.
func (r *running) waitHeld(within time.Duration, want ...string) time.Time {
	r.t.Helper()
	var body string
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var code int
		code, body = r.readyBody()
		ok := code == http.StatusServiceUnavailable
		for _, w := range want {
			ok = ok && strings.Contains(body, w)
		}
		if ok {
			return time.Now()
		}
	}
	r.t.Fatalf("/readyz did not answer 503 %q within %v; last %q", want, within, body)
	return time.Time{}
}

// When JetStream will not make the streams again, or is off, the worker keeps trying and says
// so: /readyz 503 with the reason past FetchGrace, stalled (omnigraph_stalled 1, the budget
// counter, an error log) past retry_budget; once JetStream can, it makes them again, commits,
// and the stall clears.
func TestStreamsNotRecreatedReportsStalled(t *testing.T) {
	dir := t.TempDir()
	ns := startJetStream(t, dir, -1, 1<<30)
	port := ns.Addr().(*net.TCPAddr).Port
	t.Cleanup(func() { ns.Shutdown() })
	sg := newSvcGraphOn(t, ns.ClientURL())
	events := sg.events()
	const budget = 2 * time.Second
	a := sg.runConfig("a", Config{Graph: "demo", AckWait: 2 * time.Second, RetryBudget: budget, StreamMaxBytes: 64 << 20})
	a.waitReady()
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	nextEvent(t, events)
	restart := func(maxStore int64, lose bool) time.Time {
		ns.Shutdown()
		ns.WaitForShutdown()
		if lose {
			if err := os.RemoveAll(filepath.Join(dir, "jetstream")); err != nil {
				t.Fatal(err)
			}
		}
		ns = startJetStream(t, dir, port, maxStore)
		return time.Now()
	}
	stalled := func(since time.Time, reason ...string) {
		t.Helper()
		a.waitHeld(20*time.Second, reason...)
		at := a.waitHeld(20*time.Second, append([]string{"stalled: "}, reason...)...)
		if took := at.Sub(since); took > budget+5*time.Second {
			t.Fatalf("stalled reported %v after the broker came back (retry budget %v)", took, budget)
		}
		if got := testutil.ToFloat64(a.svc.metrics.stalledGauge); got != 1 {
			t.Fatalf("omnigraph_stalled %v while stalled", got)
		}
	}

	// The store is lost and the broker has no room for the stream's stream_max_bytes: the
	// lease is taken again (its bucket reserves nothing), the stream is refused.
	stalled(restart(32<<20, true), "insufficient storage resources")
	if got := testutil.ToFloat64(a.svc.metrics.budgetSpent.WithLabelValues("stalled")); got != 1 {
		t.Fatalf(`omnigraph_retry_budget_exhausted_total{action="stalled"} %v`, got)
	}
	if e := a.logs.FilterMessageSnippet("stalled: retry budget spent").FilterLevelExact(zapcore.ErrorLevel); e.Len() == 0 {
		t.Fatalf("no stall logged at error: %v", a.logs.All())
	}

	// JetStream off: the lease is lost and its bucket does not answer; a standby for good
	// says so as well.
	stalled(restart(0, false), "lease bucket", "jetstream not enabled")

	// JetStream with room again: the worker makes what it lost again, commits, and is ready.
	restart(1<<30, false)
	a.waitReady()
	if st := a.svc.metrics.Status(); st.Stalled != "" || testutil.ToFloat64(a.svc.metrics.stalledGauge) != 0 {
		t.Fatalf("still stalled: %+v", st)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := sg.js.Stream(context.Background(), StreamName("demo")); err == nil {
			break
		} else if time.Now().After(deadline) || !errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, nats.ErrNoResponders) &&
			!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("stream: %v", err)
		}
	}
	sg.eventsResubscribed()
	// Without an id: the re-created stream's message 1 is not the lost stream's message 1.
	sg.publish(`{"type":"Person","data":{"handle":"p2","name":"P","active":true}}`)
	select {
	case ev := <-events:
		if ev.SourceSequence != 1 || ev.AlreadyApplied || ev.GraphCommitID == "" {
			t.Fatalf("event %+v, want the re-created stream's first message committed", ev)
		}
	case <-time.After(20 * time.Second):
		for _, e := range a.logs.All() {
			t.Logf("%s %s %v", e.Level, e.Message, e.ContextMap())
		}
		t.Fatal("no commit event after the recovery")
	}
	if n := recreatedCount(a.svc.metrics, "stream"); n != 1 {
		t.Fatalf("stream re-created %d times", n)
	}
}
