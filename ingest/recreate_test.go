package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The worker keys its receipts by the stream's creation time (StreamInfo.Created), which must
// be the stream's identity: the same across a restart of the server on its store, another
// once the stream is deleted and created again.
func TestStreamCreatedIsTheStreamsIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	setup := func(url string) (*Worker, jetstream.JetStream) {
		t.Helper()
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		w, err := New(nc, nil, Config{Graph: "demo"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(nc)
		return w, js
	}
	ns, err := StartEmbedded(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	w, js := setup(ns.ClientURL())
	s, err := js.Stream(ctx, w.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	created := s.CachedInfo().Created
	if created.IsZero() || w.streamCreated.Load() != created.UnixNano() {
		t.Fatalf("the worker read %d, the stream says %v", w.streamCreated.Load(), created)
	}
	if _, err := js.Publish(ctx, w.cfg.IngestSubject(), []byte(batch)); err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	ns, err = StartEmbedded(dir, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	w2, js := setup(ns.ClientURL())
	if got := w2.streamCreated.Load(); got != created.UnixNano() {
		t.Fatalf("after a server restart the stream was created at %v, before at %v", time.Unix(0, got).UTC(), created)
	}
	if err := js.DeleteStream(ctx, w.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	w3, _ := setup(ns.ClientURL())
	if got := w3.streamCreated.Load(); got <= created.UnixNano() {
		t.Fatalf("the stream created again says %v, the first %v", time.Unix(0, got).UTC(), created)
	}
}

// Issue #29, item 5: a stream deleted and created again numbers its messages from 1 again.
// Batches without a Nats-Msg-Id, whose receipts are keyed by position, must not meet the old
// stream's receipts: new batches at the old sequences are committed, one byte for byte the
// old batch at its sequence (not already_applied), the others not msg_id_reused. The stream
// is re-created by another worker's setup while this one stands by with its setup done
// before: it reads the new stream's identity when it starts to consume.
func TestRecreatedStreamDoesNotMeetOldReceipts(t *testing.T) {
	ctx := context.Background()
	h := start(t)
	old := []string{batch, person(2), person(3)}
	oldCommits := map[string]bool{}
	for _, b := range old {
		h.publish(b, nil)
	}
	for range old {
		ev := h.event()
		if ev.AlreadyApplied || ev.GraphCommitID == "" {
			t.Fatalf("old stream: %+v", ev)
		}
		oldCommits[ev.GraphCommitID] = true
	}
	h.stop()
	<-h.done
	h.done <- nil
	before := h.w.streamCreated.Load()
	standby, err := New(h.nc, h.g, Config{Graph: "demo", AckWait: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := standby.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := h.js.DeleteStream(ctx, h.w.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	if err := h.w.Setup(ctx); err != nil { // as a worker starting, or re-creating a lost stream
		t.Fatal(err)
	}
	renewed := h.w.streamCreated.Load()
	if renewed == before || standby.streamCreated.Load() != before {
		t.Fatalf("stream identities: %d, then %d; the standby holds %d", before, renewed, standby.streamCreated.Load())
	}
	run, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- standby.Run(run) }()
	t.Cleanup(func() { cancel(); <-done })

	fresh := []string{batch, person(20), person(21)} // message 1 is the old message 1 byte for byte
	for _, b := range fresh {
		h.publish(b, nil)
	}
	for i := range fresh {
		ev := h.event()
		if ev.AlreadyApplied || ev.GraphCommitID == "" || oldCommits[ev.GraphCommitID] || ev.SourceSequence != uint64(i+1) || ev.SourceStream != h.w.cfg.Stream {
			t.Fatalf("message %d of the re-created stream: %+v", i+1, ev)
		}
	}
	if standby.streamCreated.Load() != renewed {
		t.Fatalf("the standby consumed with identity %d, the stream's is %d", standby.streamCreated.Load(), renewed)
	}
	// The events stream keeps the new messages' events too: their ids name the new stream, so
	// they are not duplicates of the old messages' events of a moment ago.
	waitFor(t, func() bool {
		s, err := h.js.Stream(ctx, h.w.cfg.EventsStream)
		return err == nil && s.CachedInfo().State.Msgs == uint64(len(old)+len(fresh))
	}, "every event in the events stream")
	if dls, err := DeadLetters(ctx, h.js, h.w.cfg, ""); err != nil || len(dls) != 0 {
		t.Fatalf("dead letters %+v %v", dls, err)
	}
	out := h.export()
	for _, handle := range []string{"alice", "p2", "p3", "p20", "p21"} {
		if n := strings.Count(out, fmt.Sprintf(`"handle":%q`, handle)); n != 1 {
			t.Fatalf("%s is in the graph %d times:\n%s", handle, n, out)
		}
	}
	// Both streams' message 1 have their receipt, each under its stream's key.
	st, err := h.reader().Snapshot(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, created := range []int64{before, renewed} {
		key := fmt.Sprintf("%s@%d:1", h.w.cfg.Stream, created)
		if rc, ok, err := st.Receipt(ctx, key); err != nil || !ok || rc.StreamCreated != created {
			t.Fatalf("receipt %s: %+v %v %v", key, rc, ok, err)
		}
	}
}

// A re-created stream's dead letters are kept: the old stream's dead letter of message 1 and
// the new stream's of its own message 1 have different ids, so the DLQ stream does not drop
// the second as a duplicate within its window (the message, Termed once its dead letter was
// "accepted", would be lost).
func TestRecreatedStreamKeepsItsDeadLetters(t *testing.T) {
	ctx := context.Background()
	h := start(t)
	h.publish(`{"type":"Nope","data":{}}`, nil)
	first := h.deadLetter("invalid")
	h.stop()
	<-h.done
	h.done <- nil
	if err := h.js.DeleteStream(ctx, h.w.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	if err := h.w.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	run, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.w.Run(run) }()
	t.Cleanup(func() { cancel(); <-done })
	h.publish(`{"type":"AlsoNope","data":{}}`, nil)
	waitFor(t, func() bool {
		m := h.deadLetter("invalid")
		return m.Sequence != first.Sequence
	}, "the new stream's dead letter")
	second := h.deadLetter("invalid")
	if second.Header.Get(HeaderOrigSeq) != "1" || second.Header.Get(HeaderMsgID) == first.Header.Get(HeaderMsgID) {
		t.Fatalf("dead letters %q and %q", first.Header.Get(HeaderMsgID), second.Header.Get(HeaderMsgID))
	}
}
