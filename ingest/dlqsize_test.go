package ingest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// startPayload runs the embedded server with max_payload set to maxPayload.
func startPayload(t *testing.T, maxPayload int32) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: maxPayload, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

// A server whose max_payload is exactly 32 MiB accepts a 33,554,200-byte batch, but not that
// batch with a dead letter's error headers beside it: the dead letter must size itself against
// the connection's real limit and go by reference, and the stream must go on after it.
func TestNearLimitDeadLetterUnderTightMaxPayload(t *testing.T) {
	for _, maxPayload := range []int32{32 << 20, MaxMessageBytes} {
		t.Run(strconv.Itoa(int(maxPayload)), func(t *testing.T) {
			h := startOn(t, startPayload(t, maxPayload))
			// Short lines that are not JSON: invalid input at line 1, refused at once.
			const size = 33_554_200
			body := strings.Repeat(strings.Repeat("x", 99)+"\n", size/100) + strings.Repeat("y", size%100)
			h.publish(body, nil)
			m := h.deadLetter("invalid")
			if m.Header.Get(HeaderBodyOmitted) != strconv.Itoa(len(body)) || len(m.Data) != 0 || m.Header.Get(HeaderOrigSeq) != "1" {
				t.Fatalf("dead letter %v with %d bytes", m.Header, len(m.Data))
			}
			h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
			if ev := h.event(); ev.SourceSequence != 2 {
				t.Fatalf("event %+v", ev)
			}
			info, err := h.w.cons.Info(context.Background())
			if err != nil || info.NumRedelivered != 0 {
				t.Fatalf("consumer %+v %v: the dead letter was not accepted on its first delivery", info, err)
			}
			dls, err := DeadLetters(context.Background(), h.js, h.w.cfg, "")
			if err != nil || len(dls) != 1 {
				t.Fatalf("dead letters %+v %v", dls, err)
			}
		})
	}
}

// A dead letter JetStream does not accept (here: the dead-letter stream takes no message of
// any size; one that is gone the worker makes again) is never followed by a Term: the message
// is held and the dead letter tried again in place, without a redelivery, until the stream
// takes it; then the stream goes on. Past the retry budget the worker says it is stalled.
func TestUnacceptedDeadLetterHoldsTheMessage(t *testing.T) {
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m); w.cfg.RetryBudget = 500 * time.Millisecond })
	ctx := context.Background()
	dlq, err := h.js.Stream(ctx, h.w.cfg.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := dlq.CachedInfo().Config
	cfg.MaxMsgSize = 1
	if _, err := h.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h.publish(`{"type":"Nope","data":{}}`, nil)
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
	time.Sleep(3 * h.w.cfg.AckWait / 2) // past AckWait: the heartbeat must keep the message
	info, err := h.w.cons.Info(ctx)
	if err != nil || info.AckFloor.Stream != 0 || info.NumAckPending != 1 || info.NumRedelivered != 0 {
		t.Fatalf("consumer %+v %v: the message was let go without its dead letter", info, err)
	}
	waitMetrics(t, m, "omnigraph_stalled 1", `omnigraph_retry_budget_exhausted_total{action="stalled"} 1`)
	cfg.MaxMsgSize = MaxMessageBytes
	if _, err := h.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h.deadLetter("invalid")
	if ev := h.event(); ev.SourceSequence != 2 {
		t.Fatalf("event %+v", ev)
	}
	if info, err := h.w.cons.Info(ctx); err != nil || info.NumRedelivered != 0 {
		t.Fatalf("consumer %+v %v", info, err)
	}
	waitMetrics(t, m, "omnigraph_stalled 0")
}

// The max-deliver advisory path does the same: the server has moved past the message, so its
// dead letter is tried until accepted.
func TestUnacceptedMaxDeliverDeadLetterIsRetried(t *testing.T) {
	ctx := context.Background()
	h := start(t)
	h.stop()
	<-h.done
	h.done <- nil
	h.w.cfg.RetryMax = 200 * time.Millisecond
	if _, err := h.js.CreateOrUpdateConsumer(ctx, h.w.cfg.Stream, jetstream.ConsumerConfig{
		Durable: h.w.cfg.Consumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 300 * time.Millisecond,
		MaxDeliver: 2, MaxAckPending: 1, FilterSubject: h.w.cfg.IngestSubject()}); err != nil {
		t.Fatal(err)
	}
	if err := h.js.DeleteStream(ctx, h.w.cfg.DLQStream); err != nil {
		t.Fatal(err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { _ = h.w.WatchMaxDeliveries(watchCtx) }()
	time.Sleep(100 * time.Millisecond)
	h.publish(`{"type":"Person","data":{"handle":"poison","name":"P","active":true}}`, nil)
	cons, _ := h.js.Consumer(ctx, h.w.cfg.Stream, h.w.cfg.Consumer)
	for i := 0; i < 3; i++ {
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range b.Messages() {
		}
		time.Sleep(400 * time.Millisecond)
	}
	time.Sleep(time.Second) // the advisory came and its dead letter failed at least once
	if _, err := h.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: h.w.cfg.DLQStream, Subjects: []string{"omnigraph.demo.dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	if m := h.deadLetter("max_deliver"); !strings.Contains(string(m.Data), "poison") {
		t.Fatalf("dead letter %v %s", m.Header, m.Data)
	}
}
