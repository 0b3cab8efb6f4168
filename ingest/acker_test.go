package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/failpoint"
)

// ackWait sets the consumer's AckWait (Setup again, as depth does).
func ackWait(d time.Duration) func(*Worker) {
	return func(w *Worker) {
		w.cfg.AckWait = d
		if err := w.Setup(context.Background()); err != nil {
			panic(err)
		}
	}
}

// ackFloor is the consumer's ack floor and how many messages it has delivered unacknowledged.
func (h *harness) ackFloor() (floor uint64, pending int) {
	h.t.Helper()
	info, err := h.w.cons.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	return info.AckFloor.Stream, info.NumAckPending
}

// The writer does not wait for a message's ack: with the first ack held in the acker, the
// second message commits all the same, and the events, each after its ack, come in stream
// order once the ack goes out.
func TestAckRunsBesideTheNextCommit(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	// Long enough for the second commit on a loaded machine under the race detector; the
	// AckWait is longer still, so that nothing is redelivered meanwhile.
	if err := failpoint.Enable(FailpointAckQueued, "1*sleep(6000)"); err != nil {
		t.Fatal(err)
	}
	h := start(t, ackWait(30*time.Second), depth(4))
	h.publish(person(0), map[string]string{HeaderMode: "append"})
	h.publish(person(1), map[string]string{HeaderMode: "append"})
	waitFor(t, func() bool {
		out := h.export()
		return strings.Contains(out, `"handle":"p0"`) && strings.Contains(out, `"handle":"p1"`)
	}, "both commits while the first ack is held")
	if floor, pending := h.ackFloor(); floor != 0 || pending != 2 {
		t.Fatalf("ack floor %d with %d pending while the first ack is held: want 0 and 2", floor, pending)
	}
	if n := len(h.events); n != 0 {
		t.Fatalf("%d events before their messages' acks", n)
	}
	if seqs := h.inOrder(2); seqs[0] != 1 || seqs[1] != 2 {
		t.Fatalf("events of messages %v, want 1 and 2", seqs)
	}
	if floor, pending := h.ackFloor(); floor != 2 || pending != 0 {
		t.Fatalf("ack floor %d with %d pending after both events: want 2 and 0", floor, pending)
	}
}

// A worker told to stop acknowledges what its acker holds before Run returns.
func TestRunReturnsAfterTheQueuedAcks(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(FailpointAckQueued, "1*sleep(1500)"); err != nil {
		t.Fatal(err)
	}
	h := start(t, ackWait(30*time.Second), depth(4))
	h.publish(person(0), map[string]string{HeaderMode: "append"})
	waitFor(t, func() bool { return failpoint.Hits(FailpointAckQueued) > 0 }, "the ack queued")
	h.stop()
	err := <-h.done
	h.done <- err // for the harness's cleanup
	if err != nil {
		t.Fatal(err)
	}
	if floor, pending := h.ackFloor(); floor != 1 || pending != 0 {
		t.Fatalf("ack floor %d with %d pending once Run returned: want 1 and 0", floor, pending)
	}
	if ev := h.event(); ev.SourceSequence != 1 {
		t.Fatalf("event of message %d, want 1", ev.SourceSequence)
	}
}

// An ack that does not go out leaves a visible commit unacknowledged: its event is published
// all the same, and the redelivery is recognised by its receipt, applied once.
func TestFailedAckIsRecognisedOnRedelivery(t *testing.T) {
	t.Cleanup(failpoint.Reset)
	if err := failpoint.Enable(FailpointAckQueued, "1*error"); err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	h := start(t, depth(4), func(w *Worker) { w.UseMetrics(m) })
	h.publish(batch, map[string]string{HeaderMode: "append"})
	if ev := h.event(); ev.Outcome != OutcomeCommitted || ev.SourceSequence != 1 {
		t.Fatalf("first event %+v: want the commit of message 1", ev)
	}
	if ev := h.event(); ev.Outcome != OutcomeAlreadyApplied || ev.SourceSequence != 1 {
		t.Fatalf("second event %+v: want message 1 already applied", ev)
	}
	if n := strings.Count(h.export(), `"handle":"alice"`); n != 1 {
		t.Fatalf("alice is in the graph %d times", n)
	}
	waitFor(t, func() bool { floor, pending := h.ackFloor(); return floor == 1 && pending == 0 }, "the redelivery acknowledged")
	waitMetrics(t, m, "omnigraph_acks_failed_total 1", `omnigraph_messages_total{outcome="already_applied"} 1`)
}
