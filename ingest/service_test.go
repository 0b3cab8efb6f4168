package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
	"github.com/omnigraph/omnigraph-worker/recovery"
	"github.com/omnigraph/omnigraph-worker/storage"
)

// serviceTTL is long enough that a renewal (every third of it) does not miss on a busy machine
// under -race, short enough that a takeover is quick.
const serviceTTL = 1500 * time.Millisecond

// svcGraph is one graph root on local disk and NATS, shared by the services of a test as
// processes on one host would share them.
type svcGraph struct {
	t   *testing.T
	dir string
	url string
	js  jetstream.JetStream
	// eventConns are the connections events() subscribed on, for tests that restart the
	// broker and must not publish before those subscriptions are back.
	eventConns []*nats.Conn
}

func newSvcGraph(t *testing.T) *svcGraph {
	t.Helper()
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	return newSvcGraphOn(t, ns.ClientURL())
}

// newSvcGraphOn is newSvcGraph against the NATS server at url.
func newSvcGraphOn(t *testing.T, url string) *svcGraph {
	t.Helper()
	dir := t.TempDir()
	root, err := storage.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	src, _ := os.ReadFile("../graph/pg/testdata/example.pg")
	if _, err := engine.Init(context.Background(), root, string(src)); err != nil {
		t.Fatal(err)
	}
	sg := &svcGraph{t: t, dir: dir, url: url}
	sg.js, _ = jetstream.New(sg.connect())
	return sg
}

func (sg *svcGraph) connect() *nats.Conn {
	nc, err := nats.Connect(sg.url)
	if err != nil {
		sg.t.Fatal(err)
	}
	sg.t.Cleanup(nc.Close)
	return nc
}

// open opens the graph read-only on a store of its own, as `worker run` does.
func (sg *svcGraph) open() *engine.Graph {
	st, err := storage.Open(context.Background(), sg.dir)
	if err != nil {
		sg.t.Fatal(err)
	}
	sg.t.Cleanup(func() { st.Close() })
	g, err := engine.OpenReadOnly(context.Background(), st)
	if err != nil {
		sg.t.Fatal(err)
	}
	return g
}

// running is a Service running in the background.
type running struct {
	t    *testing.T
	svc  *Service
	addr string // its HTTP server
	logs *observer.ObservedLogs
	stop context.CancelFunc
	done chan error
}

// run starts a service of holder on its own connection and graph handle.
func (sg *svcGraph) run(holder string, opts ...ServiceOpt) *running {
	sg.t.Helper()
	return sg.runConfig(holder, Config{Graph: "demo", AckWait: 2 * time.Second}, opts...)
}

// runConfig is run with the worker's configuration cfg.
func (sg *svcGraph) runConfig(holder string, cfg Config, opts ...ServiceOpt) *running {
	sg.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sg.t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	opts = append([]ServiceOpt{WithHolder(holder), WithLeaseTTL(serviceTTL), WithHTTPListener(ln), WithLogger(zap.New(core))}, opts...)
	svc, err := NewService(sg.connect(), sg.open(), cfg, opts...)
	if err != nil {
		ln.Close()
		sg.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{t: sg.t, svc: svc, addr: ln.Addr().String(), logs: logs, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	sg.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			sg.t.Error("service did not stop")
		}
	})
	return r
}

// end stops the service and returns what Run returned.
func (r *running) end() error {
	r.t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		r.t.Fatal("Run did not return")
	}
	return nil
}

// readyz is the status of GET /readyz, or 0 when nothing answers.
func (r *running) readyz() int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + r.addr + "/readyz")
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (r *running) waitReady() {
	r.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r.readyz() == http.StatusOK {
			return
		}
	}
	r.t.Fatal("the service never became ready")
}

// holder is who holds the graph's lease ("" for nobody).
func (sg *svcGraph) holder() string {
	sg.t.Helper()
	kv, err := sg.js.KeyValue(context.Background(), LeaseBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return ""
	}
	if err != nil {
		sg.t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), "demo")
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return ""
	}
	if err != nil {
		sg.t.Fatal(err)
	}
	return string(e.Value())
}

func (sg *svcGraph) publish(body string) {
	sg.t.Helper()
	m := nats.NewMsg("omnigraph.demo.ingest")
	m.Data = []byte(body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sg.js.PublishMsg(ctx, m); err != nil {
		sg.t.Fatal(err)
	}
}

// events subscribes to the graph's commit events.
func (sg *svcGraph) events() chan Event {
	ch := make(chan Event, 16)
	nc := sg.connect()
	sg.eventConns = append(sg.eventConns, nc)
	sub, err := nc.Subscribe("omnigraph.demo.events", func(m *nats.Msg) {
		var ev Event
		if json.Unmarshal(m.Data, &ev) == nil {
			ch <- ev
		}
	})
	if err != nil {
		sg.t.Fatal(err)
	}
	sg.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return ch
}

// eventsResubscribed waits until every events() connection has reconnected to a restarted
// broker and the broker has its subscription again: an event published before that is lost
// to a core subscription.
func (sg *svcGraph) eventsResubscribed() {
	sg.t.Helper()
	for _, nc := range sg.eventConns {
		deadline := time.Now().Add(20 * time.Second)
		for !nc.IsConnected() {
			if time.Now().After(deadline) {
				sg.t.Fatalf("events connection %v after 20s", nc.Status())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := nc.FlushTimeout(5 * time.Second); err != nil {
			sg.t.Fatalf("events connection: %v", err)
		}
	}
}

func nextEvent(t *testing.T, ch chan Event) Event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no commit event")
	}
	return Event{}
}

// pendIntent leaves a recovery intent on the graph, as a writer killed after its first table
// commit would.
func (sg *svcGraph) pendIntent(handle string) {
	sg.t.Helper()
	t := sg.t
	st, err := storage.Open(context.Background(), sg.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, err := engine.Open(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := framing.ParseBytes([]byte(`{"type":"Person","data":{"handle":"`+handle+`","name":"P","active":true}}`), framing.DefaultLimits())
	if err := failpoint.Enable("load.after_table_commit", "1*error"); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Reset()
	if _, err := g.Load(context.Background(), engine.LoadRequest{Mode: engine.ModeAppend, Records: recs}); err == nil {
		t.Fatal("the load did not stop after its table commit")
	}
	if pending, err := recovery.List(context.Background(), st); err != nil || len(pending) != 1 {
		t.Fatalf("pending intents %v %v", pending, err)
	}
}

// Two services on one graph: the first holds the lease and consumes, the second waits as a
// standby (not ready, consuming nothing). Once the holder stops, the standby takes the lease
// over, runs full recovery (resolving the intent a dead writer left) and consumes.
func TestServiceStandbyTakesOver(t *testing.T) {
	sg := newSvcGraph(t)
	events := sg.events()
	a := sg.run("a")
	a.waitReady()
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	if ev := nextEvent(t, events); ev.SourceSequence != 1 {
		t.Fatalf("event %+v", ev)
	}
	b := sg.run("b")
	time.Sleep(2 * serviceTTL)
	if got := b.readyz(); got != http.StatusServiceUnavailable || sg.holder() != "a" {
		t.Fatalf("standby /readyz %d, lease held by %q", got, sg.holder())
	}
	if w := b.logs.FilterMessage("waiting for the single-writer lease"); w.Len() != 1 || w.All()[0].ContextMap()["held_by"] != "a" ||
		b.logs.FilterMessage("ready").Len() != 0 || b.logs.FilterMessage("lease acquired").Len() != 0 {
		t.Fatalf("standby logs: %v", b.logs.All())
	}
	// The leader got the lease at once: it never said it was waiting for it.
	if a.logs.FilterMessage("waiting for the single-writer lease").Len() != 0 || a.logs.FilterMessage("lease acquired").Len() != 1 {
		t.Fatalf("leader logs: %v", a.logs.All())
	}
	sg.pendIntent("ghost")
	if err := a.end(); err != nil {
		t.Fatalf("holder's Run: %v", err)
	}
	b.waitReady()
	if sg.holder() != "b" {
		t.Fatalf("lease held by %q after the takeover", sg.holder())
	}
	if n := b.logs.FilterMessage("recovered").Len(); n != 1 {
		t.Fatalf("%d recovered intents logged, want 1: %v", n, b.logs.All())
	}
	if pending, err := recovery.List(context.Background(), sg.open().Root()); err != nil || len(pending) != 0 {
		t.Fatalf("intents left after the takeover: %v %v", pending, err)
	}
	sg.publish(`{"type":"Person","data":{"handle":"p2","name":"P","active":true}}`)
	if ev := nextEvent(t, events); ev.SourceSequence != 2 {
		t.Fatalf("event %+v", ev)
	}
}

// Run returns nil when its context ends, having released the lease (a standby need not wait
// for it to expire), closed its HTTP server and left no goroutine running.
func TestServiceStopReleasesLeaseAndServer(t *testing.T) {
	sg := newSvcGraph(t)
	events := sg.events()
	a := sg.run("a")
	a.waitReady()
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	nextEvent(t, events)
	if sg.holder() != "a" {
		t.Fatalf("lease held by %q", sg.holder())
	}
	if err := a.end(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if h := sg.holder(); h != "" {
		t.Fatalf("lease still held by %q after Run returned", h)
	}
	if c, err := net.DialTimeout("tcp", a.addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the HTTP server still accepts connections after Run returned")
	}
	deadline := time.Now().Add(5 * time.Second)
	for left := ownGoroutines(); len(left) > 0; left = ownGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still running after Run returned:\n\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A lease lost under the holder (its key deleted, as when NATS lost it) sends the service
// back to standby; it takes the lease again under a new epoch and consumes on.
func TestServiceBackToStandbyOnLeaseLoss(t *testing.T) {
	sg := newSvcGraph(t)
	events := sg.events()
	a := sg.run("a")
	a.waitReady()
	kv, err := sg.js.KeyValue(context.Background(), LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(context.Background(), "demo"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for a.logs.FilterMessage("ready").Len() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no second takeover: %v", a.logs.All())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if a.logs.FilterMessage("lease lost: back to standby").Len() != 1 {
		t.Fatalf("logs: %v", a.logs.All())
	}
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	if ev := nextEvent(t, events); ev.SourceSequence != 1 {
		t.Fatalf("event %+v", ev)
	}
	// Each takeover logs its own epoch, once.
	var epochs []int64
	for _, e := range a.logs.FilterMessage("ready").All() {
		n := 0
		for _, f := range e.Context {
			if f.Key == "epoch" {
				n++
				epochs = append(epochs, f.Integer)
			}
		}
		if n != 1 {
			t.Fatalf("%d epoch fields in %v", n, e.Context)
		}
	}
	if len(epochs) != 2 || epochs[1] <= epochs[0] {
		t.Fatalf("epochs %v", epochs)
	}
}

// A full recovery that fails a few times for a passing reason (here the store refusing twice to
// list the intents) is tried again, and the worker goes on to consume.
func TestServiceRecoveryRetriesPassingFailures(t *testing.T) {
	sg := newSvcGraph(t)
	g := sg.open()
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("storage.list_dir", "2*error"); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	svc, err := NewService(sg.connect(), g, Config{Graph: "demo"}, WithHolder("a"), WithLeaseTTL(serviceTTL), WithLogger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); !svc.metrics.Status().Ready; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("not ready: %v", logs.All())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := logs.FilterMessageSnippet("recovery before consuming failed; trying again").Len(); n != 2 {
		t.Fatalf("%d retries logged, want 2", n)
	}
}

// A full recovery that keeps failing before consuming (the store refusing to list the intents)
// ends Run with a *RecoveryError after recoveryAttempts tries, and the lease is released for
// another worker to try.
func TestServiceRecoveryFailureReleasesLease(t *testing.T) {
	sg := newSvcGraph(t)
	g := sg.open()
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("storage.list_dir", "error"); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := NewService(sg.connect(), g, Config{Graph: "demo"}, WithHolder("a"), WithLeaseTTL(serviceTTL), WithHTTPListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = svc.Run(ctx)
	var re *RecoveryError
	var fe *failpoint.Error
	if !errors.As(err, &re) || !errors.As(err, &fe) || !strings.Contains(err.Error(), "recovery before consuming") {
		t.Fatalf("Run: %v, want a *RecoveryError of the injected failure", err)
	}
	if h := sg.holder(); h != "" {
		t.Fatalf("lease still held by %q", h)
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Fatal("the HTTP server outlived Run")
	}
}

// An HTTP address that cannot be listened on fails Run at once, before it takes the lease.
func TestServiceHTTPAddressInUse(t *testing.T) {
	sg := newSvcGraph(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	svc, err := NewService(sg.connect(), sg.open(), Config{Graph: "demo"}, WithHTTP(taken.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Run(context.Background())
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "listen" {
		t.Fatalf("Run: %v, want the listen error", err)
	}
	if h := sg.holder(); h != "" {
		t.Fatalf("lease taken by %q", h)
	}
}

// Options and the config are checked when the service is made.
func TestServiceOptionsRefused(t *testing.T) {
	sg := newSvcGraph(t)
	nc, g := sg.connect(), sg.open()
	for name, opt := range map[string]ServiceOpt{
		"WithLeaseTTL(0)":       WithLeaseTTL(0),
		"WithHolder(\"\")":      WithHolder(""),
		"WithLogger(nil)":       WithLogger(nil),
		"WithMetrics(nil)":      WithMetrics(nil),
		"WithHTTPListener(nil)": WithHTTPListener(nil),
	} {
		if _, err := NewService(nc, g, Config{Graph: "demo"}, opt); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, err := NewService(nc, g, Config{Graph: "demo", CompactionFanout: 1}); err == nil {
		t.Error("compaction fanout 1 accepted")
	}
	var ge *GraphNameError
	if _, err := NewService(nc, g, Config{Graph: "a.b"}); !errors.As(err, &ge) {
		t.Errorf("graph a.b: %v", err)
	}
}

// A worker that takes its graph over a second time logs the new epoch, once: the epoch field
// of the first lease is not kept beside it.
func TestUseLeaseLogsOneEpoch(t *testing.T) {
	sg := newSvcGraph(t)
	core, logs := observer.New(zapcore.DebugLevel)
	w, err := New(sg.connect(), sg.open(), Config{Graph: "demo"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var epochs []uint64
	for i := 0; i < 2; i++ {
		l, err := AcquireLease(ctx, w.js, "demo", "w", serviceTTL, Replication{})
		if err != nil {
			t.Fatal(err)
		}
		w.UseLease(l)
		w.log.Info("took over")
		epochs = append(epochs, l.Epoch())
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, e := range logs.FilterMessage("took over").All() {
		var got []int64
		for _, f := range e.Context {
			if f.Key == "epoch" {
				got = append(got, f.Integer)
			}
		}
		if len(got) != 1 || uint64(got[0]) != epochs[i] {
			t.Fatalf("takeover %d logged epoch fields %v, want [%d]", i+1, got, epochs[i])
		}
	}
}

// compaction_fanout has one meaning: 0 is off (not "the default"), 1 is refused.
func TestCompactionFanoutZeroIsOff(t *testing.T) {
	for _, c := range []struct {
		fanout int
		ok     bool
	}{{0, true}, {2, true}, {16, true}, {1, false}, {-1, false}} {
		cfg := Config{Graph: "demo", CompactionFanout: c.fanout}
		err := cfg.withDefaults()
		if (err == nil) != c.ok || c.ok && cfg.CompactionFanout != c.fanout {
			t.Errorf("fanout %d: %v, fanout after defaults %d", c.fanout, err, cfg.CompactionFanout)
		}
	}
}

// A dead letter is logged at warn (someone must look at it), a commit at info.
func TestDeadLetterLoggedAtWarn(t *testing.T) {
	sg := newSvcGraph(t)
	a := sg.run("a")
	a.waitReady()
	sg.publish(`{"type":"Nope","data":{}}`)
	sg.publish(`{"type":"Person","data":{"handle":"p1","name":"P","active":true}}`)
	deadline := time.Now().Add(10 * time.Second)
	for a.logs.FilterMessage("message").Len() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("logs: %v", a.logs.All())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, e := range a.logs.FilterMessage("message").All() {
		want := zapcore.InfoLevel
		if e.ContextMap()["outcome"] == string(outcomeDeadLetter) {
			want = zapcore.WarnLevel
			if e.ContextMap()["reason"] != "invalid" {
				t.Errorf("dead letter logged without its reason: %v", e.ContextMap())
			}
		}
		if e.Level != want {
			t.Errorf("%v logged at %v, want %v", e.ContextMap()["outcome"], e.Level, want)
		}
	}
}

// The runtime's profiles are served on the service's HTTP address only when WithProfiles
// asks for them.
func TestServiceProfilesOnlyWhenAsked(t *testing.T) {
	sg := newSvcGraph(t)
	for _, on := range []bool{false, true} {
		r := sg.run(fmt.Sprintf("profiles-%v", on), WithProfiles(on))
		r.waitReady()
		resp, err := http.Get("http://" + r.addr + "/debug/pprof/heap?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if served := resp.StatusCode == http.StatusOK && strings.Contains(string(body), "heap profile:"); served != on {
			t.Fatalf("WithProfiles(%v): /debug/pprof/heap answered %d %.100q", on, resp.StatusCode, body)
		}
		if err := r.end(); err != nil {
			t.Fatal(err)
		}
	}
}
