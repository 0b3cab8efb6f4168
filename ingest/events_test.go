package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/omnigraph/omnigraph-worker/engine"
	"github.com/omnigraph/omnigraph-worker/graph/errs"
	"github.com/omnigraph/omnigraph-worker/publisher"
)

// Each outcome has its own deterministic event id: a committed and an already_applied event
// share the commit's (the second is the first's duplicate), the others add their suffix, a
// hold its kind.
func TestOutcomeEventMsgIDs(t *testing.T) {
	const created = 1733162658123456789
	base := "event:OMNIGRAPH_DEMO@1733162658123456789:17"
	for _, c := range []struct{ outcome, kind, want string }{
		{"", "", base},
		{OutcomeCommitted, "", base},
		{OutcomeAlreadyApplied, "", base},
		{OutcomeDeadLettered, errs.KindKeyConflict, base + ":dead_lettered"},
		{OutcomeEmpty, "", base + ":empty"},
		{OutcomeHeld, errs.KindCorrupt, base + ":held:corrupt"},
		{OutcomeHeld, errs.KindTableDrift, base + ":held:table_drift"},
	} {
		if got := OutcomeEventMsgID("OMNIGRAPH_DEMO", created, 17, c.outcome, c.kind); got != c.want {
			t.Errorf("%s/%s: %q, want %q", c.outcome, c.kind, got, c.want)
		}
	}
	if got := OutcomeEventMsgID("S", 0, 3, OutcomeEmpty, ""); got != "event:S:3:empty" {
		t.Errorf("without a creation time: %q", got)
	}
	if EventMsgID("S", created, 3) != OutcomeEventMsgID("S", created, 3, OutcomeCommitted, "") {
		t.Error("the commit event's id changed")
	}
}

// storedEvents are the events the events stream holds, by their Nats-Msg-Id, once it holds at
// least want of them (or after 5 s): a subscriber may see an event before the stream has
// stored it.
func (h *harness) storedEvents(want uint64) map[string]Event {
	h.t.Helper()
	ctx := context.Background()
	s, err := h.js.Stream(ctx, h.w.cfg.EventsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	for deadline := time.Now().Add(5 * time.Second); err == nil && info.State.Msgs < want && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		info, err = s.Info(ctx)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]Event{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			h.t.Fatal(err)
		}
		var ev Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			h.t.Fatal(err)
		}
		id := m.Header.Get(HeaderMsgID)
		if _, dup := out[id]; dup {
			h.t.Fatalf("event id %s stored twice", id)
		}
		out[id] = ev
	}
	return out
}

// A dead-lettered batch is an event: kind and outcome dead_lettered, the reason, the error's
// kind, text and fields, the dead letter's stream and sequence, and the message's stream,
// sequence, Nats-Msg-Id and receipt key. A commit event says committed; already_applied says
// so.
func TestDeadLetteredEvent(t *testing.T) {
	h := start(t)
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "b-1", HeaderActor: "pipeline"})
	if ev := h.event(); ev.Outcome != OutcomeCommitted || ev.Kind != "load" || ev.ReceiptKey != "b-1" || ev.SourceMsgID != "b-1" {
		t.Fatalf("commit event %+v", ev)
	}
	h.publish(batch, map[string]string{HeaderMode: "append", HeaderMsgID: "b-2", HeaderActor: "pipeline"})
	ev := h.other()
	dl := h.deadLetter(errs.KindKeyConflict)
	if ev.Kind != OutcomeDeadLettered || ev.Outcome != OutcomeDeadLettered || ev.Request != RequestLoad || ev.Reason != errs.KindKeyConflict ||
		ev.ErrorKind != errs.KindKeyConflict || ev.Error != dl.Header.Get(HeaderError) || !strings.Contains(string(ev.ErrorDetail), `"entity_id":"w1"`) ||
		ev.DLQStream != h.w.cfg.DLQStream || ev.DLQSequence != dl.Sequence || ev.DLQSubject != h.w.cfg.DLQSubject(errs.KindKeyConflict) ||
		ev.SourceStream != h.w.cfg.Stream || ev.SourceSequence != 2 || ev.SourceMsgID != "b-2" || ev.ReceiptKey != "b-2" ||
		ev.Graph != "demo" || ev.Branch != "main" || ev.Mode != engine.ModeAppend || ev.ActorID == nil || *ev.ActorID != "pipeline" || ev.GraphCommitID != "" {
		t.Fatalf("dead_lettered event %+v\ndead letter %d %v", ev, dl.Sequence, dl.Header)
	}
	// A message without a Nats-Msg-Id is named by its place in the stream.
	h.publish(`{"type":"Nope","data":{}}`, nil)
	ev = h.other()
	created := h.w.streamCreated.Load()
	if ev.Reason != errs.KindInvalid || ev.SourceMsgID != "" || ev.ReceiptKey != h.w.cfg.Stream+"@"+strconv.FormatInt(created, 10)+":3" {
		t.Fatalf("dead_lettered event %+v", ev)
	}
	// The stored events carry the outcome's own id.
	stored := h.storedEvents(3)
	if len(stored) != 3 {
		t.Fatalf("stored events %+v", stored)
	}
	for seq, outcome := range map[uint64]string{1: OutcomeCommitted, 2: OutcomeDeadLettered, 3: OutcomeDeadLettered} {
		id := OutcomeEventMsgID(h.w.cfg.Stream, created, seq, outcome, "")
		if ev, ok := stored[id]; !ok || ev.Outcome != outcome || ev.SourceSequence != seq {
			t.Fatalf("no %s event %s: %+v", outcome, id, stored)
		}
	}
	// Published again (a redelivery after the dead letter was kept but before the Term got
	// through): the events stream keeps the first.
	h.w.deadLettered(letter{reason: errs.KindKeyConflict, kind: errs.KindKeyConflict, text: "again", subject: h.w.cfg.IngestSubject(), header: dl.Header},
		h.w.receiptFor(2, "b-2"), &jetstream.PubAck{Stream: h.w.cfg.DLQStream, Sequence: dl.Sequence}, false)
	h.other()
	if stored := h.storedEvents(3); len(stored) != 3 {
		t.Fatalf("a repeated dead_lettered event was stored again: %+v", stored)
	}
}

// receiptFor is the receipt of message seq of the ingest stream with msgID.
func (w *Worker) receiptFor(seq uint64, msgID string) *publisher.Receipt {
	return &publisher.Receipt{Stream: w.cfg.Stream, Sequence: seq, MsgID: msgID, StreamCreated: w.streamCreated.Load()}
}

// An empty batch (no records: no bytes, blank lines) is acknowledged without a graph commit
// (nor the fork its Omnigraph-From asks for) and says so in an empty event; an empty batch with a mode no load takes is dead-lettered
// as invalid; the next batch commits.
func TestEmptyBatchCommitsNothing(t *testing.T) {
	m := NewMetrics()
	h := start(t, func(w *Worker) { w.UseMetrics(m) })
	ctx := context.Background()
	h.publish(batch, nil)
	first := h.event()
	head := func() uint64 {
		st, err := h.reader().Snapshot(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		return st.ManifestVersion
	}
	before := head()
	for i, body := range []string{"", "\n", " \r\n\t\n"} {
		h.publish(body, map[string]string{HeaderMsgID: "empty-" + strconv.Itoa(i), HeaderBranch: "stage", HeaderFrom: "main", HeaderMode: "overwrite"})
		ev := h.other()
		if ev.Kind != OutcomeEmpty || ev.Outcome != OutcomeEmpty || ev.Request != RequestLoad || ev.SourceSequence != uint64(i+2) ||
			ev.SourceMsgID != "empty-"+strconv.Itoa(i) || ev.GraphCommitID != "" || ev.Branch != "stage" || ev.Mode != engine.ModeOverwrite {
			t.Fatalf("empty event %d: %+v", i, ev)
		}
	}
	h.publish("\n", map[string]string{HeaderMode: "upsert"})
	if ev := h.other(); ev.Outcome != OutcomeDeadLettered || ev.Reason != errs.KindInvalid || !strings.Contains(ev.Error, `unknown load mode "upsert"`) {
		t.Fatalf("empty batch with a bad mode: %+v", ev)
	}
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, nil)
	if ev := h.event(); ev.SourceSequence != 6 || ev.GraphCommitID == "" || ev.GraphCommitID == first.GraphCommitID || ev.ManifestVersion != first.ManifestVersion+1 {
		t.Fatalf("the batch after the empty ones: %+v (first %+v)", ev, first)
	}
	if after := head(); after != before+1 {
		t.Fatalf("__manifest went from version %d to %d: the empty batches committed", before, after)
	}
	waitMetrics(t, m, `omnigraph_messages_total{outcome="empty"} 3`, `omnigraph_messages_total{outcome="committed"} 2`)
	h.checkNoRedelivery()
	if branches, err := h.reader().Branches(ctx); err != nil || len(branches) != 0 {
		t.Fatalf("an empty batch forked its branch: %v %v", branches, err)
	}
}

// A batch held for an operator says so once per hold, however often it is tried: kind and
// outcome held, the error's kind and text; once the graph is mended it commits and its commit
// event follows.
func TestHeldEventOncePerHold(t *testing.T) {
	h := start(t, func(w *Worker) { w.cfg.RetryMax = 100 * time.Millisecond })
	h.publish(batch, map[string]string{HeaderMode: "append"})
	h.event()
	driftTable(t, h.g, "node:Person", `{"type":"Person","data":{"handle":"intruder","name":"I","active":true}}`)
	h.publish(`{"type":"Person","data":{"handle":"bob","name":"Bob","active":true}}`, map[string]string{HeaderMode: "append", HeaderMsgID: "bob"})
	ev := h.other()
	if ev.Kind != OutcomeHeld || ev.Outcome != OutcomeHeld || ev.ErrorKind != errs.KindTableDrift || !strings.Contains(ev.Error, "ahead of published dataset version") ||
		ev.SourceSequence != 2 || ev.SourceMsgID != "bob" || ev.ReceiptKey != "bob" || ev.Attempts != 1 || ev.Request != RequestLoad {
		t.Fatalf("held event %+v", ev)
	}
	// Tried again every 100 ms: no second event.
	time.Sleep(time.Second)
	select {
	case ev := <-h.others:
		t.Fatalf("a second event while held: %+v", ev)
	default:
	}
	op, err := engine.Open(context.Background(), h.g.Root())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.RestoreDrift(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ev := h.event(); ev.SourceSequence != 2 || ev.Outcome != OutcomeCommitted || ev.GraphCommitID == "" {
		t.Fatalf("commit event after the fix: %+v", ev)
	}
	stored := h.storedEvents(3)
	id := OutcomeEventMsgID(h.w.cfg.Stream, h.w.streamCreated.Load(), 2, OutcomeHeld, errs.KindTableDrift)
	if len(stored) != 3 || stored[id].Outcome != OutcomeHeld || stored[EventMsgID(h.w.cfg.Stream, h.w.streamCreated.Load(), 2)].Outcome != OutcomeCommitted {
		t.Fatalf("stored events %+v", stored)
	}
}

// A message the server gave up on (its MAX_DELIVERIES advisory) is dead-lettered by the
// advisory watcher, which says so in the same event.
func TestMaxDeliverAdvisoryEvent(t *testing.T) {
	h := start(t)
	h.stop()
	<-h.done
	h.done <- nil
	h.publish(`{"type":"Person","data":{"handle":"poison","name":"P","active":true}}`, map[string]string{HeaderMsgID: "poison"})
	if err := h.w.deadLetterStored(context.Background(), maxDeliverAdvisory{Stream: h.w.cfg.Stream, StreamSeq: 1, Deliveries: 10}); err != nil {
		t.Fatal(err)
	}
	dl := h.deadLetter(errs.ReasonMaxDeliver)
	ev := h.other()
	if ev.Outcome != OutcomeDeadLettered || ev.Reason != errs.ReasonMaxDeliver || ev.ErrorKind != errs.ReasonMaxDeliver || ev.DLQSequence != dl.Sequence ||
		ev.SourceSequence != 1 || ev.SourceMsgID != "poison" || ev.ReceiptKey != "poison" || !strings.Contains(string(ev.ErrorDetail), `"deliveries":10`) {
		t.Fatalf("max_deliver event %+v", ev)
	}
}

// An event NATS does not take (the connection closed) is logged, never a reason to hold
// the message: the outcome stands without it.
func TestEventNotPublishedIsLogged(t *testing.T) {
	ns, err := StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	w, err := New(nc, nil, Config{Graph: "demo"}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	w.emit(w.outcomeEvent(OutcomeEmpty, w.cfg.IngestSubject(), nats.Header{}), &publisher.Receipt{Stream: w.cfg.Stream, Sequence: 4})
	got := logs.FilterMessage("event not published").All()
	if len(got) != 1 || got[0].ContextMap()["outcome"] != OutcomeEmpty || !strings.Contains(fmt.Sprint(got[0].ContextMap()["error"]), "closed") {
		t.Fatalf("logs %+v", logs.All())
	}
}
