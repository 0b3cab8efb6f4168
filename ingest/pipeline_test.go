package ingest

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/framing"
	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// depth runs the worker with a pipeline of n messages (Setup again: MaxAckPending follows).
func depth(n int) func(*Worker) {
	return func(w *Worker) {
		w.cfg.PipelineDepth = n
		if err := w.Setup(context.Background()); err != nil {
			panic(err)
		}
	}
}

func person(i int) string {
	return fmt.Sprintf(`{"type":"Person","data":{"handle":"p%d","name":"P","active":true}}`, i)
}

// events takes n events and requires them in increasing stream order.
func (h *harness) inOrder(n int) []uint64 {
	h.t.Helper()
	var seqs []uint64
	for range n {
		ev := h.event()
		if len(seqs) > 0 && ev.SourceSequence <= seqs[len(seqs)-1] {
			h.t.Fatalf("event of message %d after %v: out of stream order", ev.SourceSequence, seqs)
		}
		seqs = append(seqs, ev.SourceSequence)
	}
	return seqs
}

// exactlyOnce requires every handle p0..p<n-1> but those in skip once in the graph.
func (h *harness) exactlyOnce(n int, skip map[int]bool) {
	h.t.Helper()
	out := h.export()
	for i := range n {
		want := 1
		if skip[i] {
			want = 0
		}
		if got := strings.Count(out, fmt.Sprintf(`"handle":"p%d"`, i)); got != want {
			h.t.Fatalf("p%d is in the graph %d times, want %d:\n%s", i, got, want, out)
		}
	}
}

// With four messages in flight, commits, acks and events stay in stream order through
// dead-lettered batches between good ones and a RecoveryRequired, and nothing is redelivered.
func TestPipelineKeepsStreamOrder(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_table_commit", "1*error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) }, depth(4))
	const n = 24
	bad := map[int]bool{}
	var good []uint64
	for i := range n {
		if i%5 == 3 {
			bad[i] = true
			h.publish(`{"type":"Nope","data":{}}`, nil)
			continue
		}
		h.publish(person(i), map[string]string{HeaderMode: "append"})
		good = append(good, uint64(i+1))
	}
	if got := h.inOrder(len(good)); fmt.Sprint(got) != fmt.Sprint(good) {
		t.Fatalf("events of %v, want %v", got, good)
	}
	waitMetrics(t, m, fmt.Sprintf(`omnigraph_messages_total{outcome="committed"} %d`, len(good)),
		fmt.Sprintf(`omnigraph_messages_total{outcome="dead_lettered"} %d`, len(bad)), "omnigraph_recoveries_total 1")
	dls, err := DeadLetters(t.Context(), h.js, h.w.cfg, "")
	if err != nil || len(dls) != len(bad) {
		t.Fatalf("dead letters %+v %v", dls, err)
	}
	h.checkNoRedelivery()
	h.exactlyOnce(n, bad)
}

// takeOver stops h's worker, publishes n messages, lets a holder that then dies take the
// first, and starts a worker of configuration cfg on the graph; stop ends it.
func (h *harness) takeOver(n int, cfg Config) (stop func()) {
	h.t.Helper()
	h.stop()
	<-h.done
	h.done <- nil
	for i := range n {
		h.publish(person(i), nil)
	}
	b, err := h.w.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		h.t.Fatal(err)
	}
	for m := range b.Messages() {
		if md, _ := m.Metadata(); md.Sequence.Stream != 1 {
			h.t.Fatalf("the dead holder took %d", md.Sequence.Stream)
		}
	}
	w2, err := New(h.nc, h.g, cfg, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := w2.Setup(context.Background()); err != nil { // MaxAckPending follows cfg's depth
		h.t.Fatal(err)
	}
	run, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w2.Run(run) }()
	return func() { cancel(); <-done }
}

// After a takeover the server redelivers the previous holder's message only when its AckWait
// runs out, and delivers newer ones meanwhile: the pipeline holds those until the missing one
// comes, and applies all in stream order.
func TestPipelineWaitsForARedeliveredPredecessor(t *testing.T) {
	h := start(t, depth(4))
	defer h.takeOver(4, h.w.cfg)()
	ctx := context.Background()
	if got := h.inOrder(4); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("events of %v", got)
	}
	info, err := h.w.cons.Info(ctx)
	if err != nil || info.Delivered.Consumer != 5 || info.NumAckPending != 0 {
		t.Fatalf("consumer %+v %v: want five deliveries, the dead holder's message twice", info, err)
	}
	h.exactlyOnce(4, nil)
}

// While a predecessor is missing nothing commits, and the fetcher does not fill the pipeline
// to its depth past the bound: it holds one message ahead, waits out the ack_wait after which
// the missing one is redelivered, and then takes it.
func TestPipelineBoundHoldsWhileAPredecessorIsMissing(t *testing.T) {
	h := start(t, depth(4))
	cfg := h.w.cfg
	cfg.PipelineDepth, cfg.PipelineBytes = 8, 1
	defer h.takeOver(6, cfg)()
	ctx := context.Background()
	time.Sleep(cfg.AckWait / 2)
	info, err := h.w.cons.Info(ctx)
	if err != nil || info.Delivered.Stream != 2 || info.NumAckPending != 2 {
		t.Fatalf("consumer %+v %v: want the dead holder's message and one held ahead, no more", info, err)
	}
	if got := h.inOrder(6); fmt.Sprint(got) != "[1 2 3 4 5 6]" {
		t.Fatalf("events of %v", got)
	}
	h.exactlyOnce(6, nil)
}

// A message held by failures past AckWait holds the ones behind it, prefetched and
// heartbeated: none is redelivered, and all commit in order once it gets through.
func TestPipelineHoldsMessagesBehindAHeldOne(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(w *Worker) { w.cfg.RetryMax = 200 * time.Millisecond }, depth(4))
	for i := range 4 {
		h.publish(person(i), nil)
	}
	time.Sleep(3 * h.w.cfg.AckWait / 2)
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumAckPending != 4 || info.NumRedelivered != 0 || info.AckFloor.Stream != 0 {
		t.Fatalf("consumer while held %+v %v: want four held, none redelivered", info, err)
	}
	failpoint.Reset()
	if got := h.inOrder(4); fmt.Sprint(got) != "[1 2 3 4]" {
		t.Fatalf("events of %v", got)
	}
	h.checkNoRedelivery()
	h.exactlyOnce(4, nil)
}

// A stop with messages held finishes the one being applied and gives the rest back at once
// (not after their AckWait): none of them commits before the stop returns, and a new Run
// applies them, in order, once each.
func TestPipelineStopGivesBackTheRest(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "1*sleep(1500)"); err != nil {
		t.Fatal(err)
	}
	framed := framing.Unreleased()
	h := start(t, func(w *Worker) { w.cfg.AckWait = 10 * time.Second }, depth(4))
	const n = 6
	for i := range n {
		h.publish(person(i), nil)
	}
	waitFor(t, func() bool {
		info, err := h.w.cons.Info(context.Background())
		return err == nil && info.NumAckPending == 4
	}, "four messages in flight")
	// Stop only once message 1 is being applied: delivered is not applied, and on a loaded
	// host its staging can outlast the delivery of the three behind it.
	waitFor(t, func() bool { return failpoint.Hits("load.after_prepare") >= 1 }, "message 1 in its load")
	h.stop()
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	h.done <- nil
	if got := h.inOrder(1); got[0] != 1 {
		t.Fatalf("event of %v", got)
	}
	select {
	case ev := <-h.events:
		t.Fatalf("message %d committed after the stop; only the one being applied may", ev.SourceSequence)
	case <-time.After(300 * time.Millisecond):
	}
	// What the stager made of the held ones went back with them.
	if got := framing.Unreleased(); got != framed {
		t.Fatalf("%d framed batches not given back to the framer after the stop, want %d", got, framed)
	}
	// Given back, the rest come at once; left to their AckWait they would come after it.
	restart := time.Now()
	run, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.w.Run(run) }()
	defer func() { stop(); <-done }()
	if got := h.inOrder(n - 1); fmt.Sprint(got) != "[2 3 4 5 6]" {
		t.Fatalf("events of %v", got)
	}
	if took := time.Since(restart); took >= 3*time.Second {
		t.Fatalf("the held messages came back after %s, not at once", took)
	}
	h.exactlyOnce(n, nil)
}

// A takeover with messages in the leader's pipeline (one held by failures, three behind it)
// loses and doubles nothing: the standby applies each once, in order.
func TestPipelineTakeoverLosesAndDoublesNothing(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	h := start(t, depth(4))
	h.stop()
	<-h.done
	h.done <- nil
	ctx := context.Background()
	ttl := 600 * time.Millisecond
	leader, err := AcquireLease(ctx, h.js, "demo", "leader", ttl, Replication{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := h.w.cfg
	cfg.RetryMax = 100 * time.Millisecond
	w1, _ := New(h.nc, h.g, cfg, nil)
	w1.UseLease(leader)
	done1 := make(chan error, 1)
	go func() { done1 <- w1.Run(ctx) }()
	h.publish(person(0), nil)
	h.inOrder(1)
	if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 6; i++ {
		h.publish(person(i), nil)
	}
	waitFor(t, func() bool {
		info, err := h.w.cons.Info(ctx)
		return err == nil && info.NumAckPending == 4
	}, "the leader to hold four messages")
	leader.markLost()
	if err := <-done1; err != ErrLeaseLost {
		t.Fatalf("leader run: %v", err)
	}
	failpoint.Reset()
	standby, err := AcquireLease(ctx, h.js, "demo", "standby", ttl, Replication{})
	if err != nil {
		t.Fatal(err)
	}
	w2, _ := New(h.nc, h.g, cfg, nil)
	w2.UseLease(standby)
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w2.Run(run) }()
	defer func() { stop(); <-done }()
	if got := h.inOrder(5); fmt.Sprint(got) != "[2 3 4 5 6]" {
		t.Fatalf("events of %v", got)
	}
	h.exactlyOnce(6, nil)
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	if !poll(cond) {
		t.Fatalf("timed out waiting for %s", what)
	}
}

// poll asks cond every 20 ms until it holds, for up to 10 s, and says whether it did: waitFor,
// for a caller that says more than waitFor when it did not.
func poll(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// holdsThenApplies is the end of a test whose first message's commit fails in place
// (load.after_prepare) while the fetcher takes what its bounds let it: holds, then applies.
func (h *harness) holdsThenApplies(inFlight, n int) {
	h.t.Helper()
	h.holds(inFlight)
	h.applies(n)
}

// holds requires, a second after the messages were published, the lowest inFlight of them and
// no others delivered and pending.
func (h *harness) holds(inFlight int) {
	h.t.Helper()
	time.Sleep(time.Second) // what the fetcher would take past its bounds, it takes by then
	info, err := h.w.cons.Info(context.Background())
	if err != nil || info.NumAckPending != inFlight || info.Delivered.Stream != uint64(inFlight) {
		h.t.Fatalf("consumer %+v %v: want %d messages in flight, the lowest", info, err, inFlight)
	}
}

// applies lifts the failpoints and requires all n messages committed in stream order.
func (h *harness) applies(n int) {
	h.t.Helper()
	failpoint.Reset()
	want := make([]uint64, n)
	for i := range want {
		want[i] = uint64(i + 1)
	}
	if got := h.inOrder(n); fmt.Sprint(got) != fmt.Sprint(want) {
		h.t.Fatalf("events of %v", got)
	}
}

// pipeline_bytes bounds the prefetch: at one byte, one message waits behind the one applied,
// however deep the pipeline.
func TestPipelineBytesBoundThePrefetch(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	h := start(t, func(w *Worker) { w.cfg.RetryMax, w.cfg.PipelineBytes = 200*time.Millisecond, 1 }, depth(4))
	for i := range 4 {
		h.publish(person(i), nil)
	}
	h.holdsThenApplies(2, 4) // the message that commits and one behind it
}

// While the consumer's state cannot be read, the pipeline cannot tell whether a predecessor
// of what it holds is missing, and the bound on bytes holds: at one byte, one message is held
// (none can be applied before the order is known), not the depth's four. Once the state reads
// again, all commit in order.
func TestPipelineBytesHoldWhileTheOrderIsUnknown(t *testing.T) {
	var blind atomic.Bool
	blind.Store(true)
	var real jetstream.Consumer
	h := start(t, depth(4), func(w *Worker) {
		real = w.cons
		w.cons = blindConsumer{Consumer: w.cons, blind: &blind}
		w.cfg.PipelineBytes = 1
	})
	for i := range 4 {
		h.publish(person(i), nil)
	}
	time.Sleep(time.Second) // what the fetcher would take past its bound, it takes by then
	info, err := real.Info(context.Background())
	if err != nil || info.NumAckPending != 1 || info.Delivered.Stream != 1 {
		t.Fatalf("consumer %+v %v: want the lowest message alone in flight", info, err)
	}
	blind.Store(false)
	h.applies(4)
}

// blindConsumer's Info fails while blind is set, as a server that does not answer.
type blindConsumer struct {
	jetstream.Consumer
	blind *atomic.Bool
}

func (c blindConsumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	if c.blind.Load() {
		return nil, errors.New("no answer")
	}
	return c.Consumer.Info(ctx)
}

// The bound counts what a held message keeps beside its body (its records, the built rows),
// not only the body: with room for two bodies, one message is held behind the one that
// commits, not two.
func TestPipelineBytesCountWhatIsStaged(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	body := int64(len(person(0)))
	h := start(t, func(w *Worker) { w.cfg.RetryMax, w.cfg.PipelineBytes = 200*time.Millisecond, 2*body }, depth(8))
	for i := range 6 {
		h.publish(person(i), nil)
	}
	h.holdsThenApplies(2, 6) // the message that commits and one held behind it
}

// The message being committed stays counted, with what its commit builds, until its commit
// returns: with room for one staged message, the fetcher takes one behind the message that
// commits (one is always held ahead) and no second. Were the commit not counted, the one held
// behind it would leave room for more.
func TestPipelineBytesCountTheCommit(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable("load.after_prepare", "error"); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	h := start(t, func(w *Worker) {
		body := []byte(person(1))
		recs, err := framing.ParseRetained(body, framing.DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		built, err := w.g.Build(engine.LoadRequest{Mode: engine.ModeMerge, Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		w.cfg.RetryMax, w.cfg.PipelineBytes = 200*time.Millisecond, int64(len(body))+stagedBytes(recs, built)+1
		w.log = zap.New(core)
	}, depth(8))
	// The rest are published once the first commits, so that none is fetched before.
	h.publish(person(1), nil)
	waitFor(t, func() bool { return logs.FilterMessage("failure, retrying in place").Len() > 0 }, "the first message to commit")
	for i := 2; i <= 6; i++ {
		h.publish(person(i), nil)
	}
	waitFor(t, func() bool {
		info, err := h.w.cons.Info(context.Background())
		return err == nil && info.Delivered.Stream >= 2
	}, "a message behind the one that commits")
	h.holdsThenApplies(2, 6) // the message that commits and one held behind it
}

// A pipeline that waits longer than ack_wait for a missing predecessor says so: it is silent
// otherwise, and an operator watching a graph that does not move needs to know why.
func TestPipelineLogsALongWait(t *testing.T) {
	h := start(t, depth(4))
	h.stop()
	<-h.done
	h.done <- nil
	ctx := context.Background()
	for i := range 3 {
		h.publish(person(i), nil)
	}
	// The previous holder took message 1 and keeps it for 1.5 ack_wait, then dies with it.
	b, err := h.w.cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var taken jetstream.Msg
	for m := range b.Messages() {
		taken = m
	}
	if taken == nil {
		t.Fatal("the previous holder got nothing")
	}
	core, logs := observer.New(zap.WarnLevel)
	w2, err := New(h.nc, h.g, h.w.cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w2.Run(run) }()
	defer func() { stop(); <-done }()
	for end := time.Now().Add(3 * h.w.cfg.AckWait / 2); time.Now().Before(end); time.Sleep(h.w.cfg.AckWait / 4) {
		_ = taken.InProgress()
	}
	if got := h.inOrder(3); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("events of %v", got)
	}
	waits := logs.FilterMessage("the pipeline waits for a missing predecessor to be redelivered").All()
	if len(waits) != 1 || waits[0].ContextMap()["lowest_held"] != uint64(2) {
		t.Fatalf("long-wait warnings: %+v", waits)
	}
}

// Every framed batch's memory goes back to the framer once its message is done with —
// committed, dead-lettered, or applied after a retry — with the pipeline and without it.
func TestWorkerGivesFramesBack(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("depth=%d", n), func(t *testing.T) {
			t.Cleanup(failpoint.Reset)
			if err := failpoint.Enable("load.after_table_commit", "1*error"); err != nil {
				t.Fatal(err)
			}
			held := framing.Unreleased()
			h := start(t, depth(n))
			const msgs = 8
			for i := range msgs {
				if i == 5 {
					h.publish(`{"type":"Nope","data":{}}`, nil) // framed, then refused by the schema
					continue
				}
				h.publish(person(i), map[string]string{HeaderMode: "append"})
			}
			h.inOrder(msgs - 1)
			waitFor(t, func() bool { return framing.Unreleased() == held }, "every frame given back")
		})
	}
}

// The stager, the commit loop and the compactor carry ProfileLabel, so a CPU profile of a
// serving worker (WithProfiles) splits its cost between them.
func TestPipelinePartsCarryProfileLabels(t *testing.T) {
	h := start(t, func(w *Worker) { w.cfg.CompactionFanout = 4 }, depth(4))
	h.publish(person(1), map[string]string{HeaderMode: "append"})
	h.event()
	var dump strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&dump, 1); err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{"stage", "commit", "maintenance"} {
		if want := fmt.Sprintf(`"%s":"%s"`, ProfileLabel, part); !strings.Contains(dump.String(), want) {
			t.Errorf("no goroutine labelled %s", want)
		}
	}
}

// A redelivery of a message the session already finished (its ack lost, as when the writer's
// server dies between a commit and its ack) is taken at once, below the last finished
// sequence: the consumer's ack floor is past it, and waiting for a "missing predecessor" of
// it stalled a cluster failover for good. The pipe has no consumer to ask: asking would fail.
func TestPipelineTakesARedeliveryOfAFinishedMessage(t *testing.T) {
	p := &pipe{w: &Worker{}, held: map[uint64]*held{}, changed: make(chan struct{}, 1), space: make(chan struct{}, 1), last: 80}
	for _, seq := range []uint64{78, 81, 82} {
		p.held[seq] = &held{seq: seq}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := p.next(ctx)
	if h == nil || h.seq != 78 {
		t.Fatalf("next took %v, want the redelivered 78 at once", h)
	}
	delete(p.held, 78)
	if h := p.next(ctx); h == nil || h.seq != 81 {
		t.Fatalf("next took %v after it, want 81, the one after the last finished", h)
	}
}
