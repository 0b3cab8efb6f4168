package worker

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// commitEvent is what the recreate test reads of a commit event.
type commitEvent struct {
	Seq            uint64 `json:"source_sequence"`
	Commit         string `json:"graph_commit_id"`
	AlreadyApplied bool   `json:"already_applied"`
}

// nextEvents reads n commit events from sub, failing the test when they do not come.
func nextEvents(t *testing.T, sub *nats.Subscription, n int, w *workerProc) []commitEvent {
	t.Helper()
	var out []commitEvent
	for range n {
		m, err := sub.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatalf("%d commit events of %d, then: %v\nworker output:\n%s", len(out), n, err, w.out)
		}
		var ev commitEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// Issue #29, item 5, through real processes: the ingest stream is deleted while the worker
// runs (`nats stream rm`), the worker is restarted and creates it again, numbered from 1
// again. New batches without a Nats-Msg-Id at the old sequences are each committed: the one
// byte for byte the old batch at its sequence is not acknowledged as already_applied, the
// others are not dead-lettered as msg_id_reused.
func TestRecreatedStreamCommitsNewBatches(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	sub := watchEvents(t, ns.url).sub
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	for i := range 3 {
		publishBody(t, ns.url, graphtest.BatchBody(i), nil)
	}
	waitAcked(t, ns.url, 3, w)
	oldCommits := map[string]bool{}
	for _, ev := range nextEvents(t, sub, 3, w) {
		if ev.AlreadyApplied || ev.Commit == "" {
			t.Fatalf("old stream: %+v", ev)
		}
		oldCommits[ev.Commit] = true
	}

	js := connectJS(t, ns.url)
	if err := js.DeleteStream(context.Background(), "OMNIGRAPH_DEMO"); err != nil {
		t.Fatal(err)
	}
	w.terminate(t)
	w2 := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	for _, i := range []int{0, 10, 11} { // message 1 is the old message 1 byte for byte
		publishBody(t, ns.url, graphtest.BatchBody(i), nil)
	}
	waitAcked(t, ns.url, 3, w2)
	for i, ev := range nextEvents(t, sub, 3, w2) {
		if ev.AlreadyApplied || ev.Commit == "" || oldCommits[ev.Commit] || ev.Seq != uint64(i+1) {
			t.Fatalf("message %d of the re-created stream: %+v\nworker output:\n%s", i+1, ev, w2.out)
		}
	}
	// The events stream keeps them all: the new events' ids name the new stream.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n uint64
		s, err := js.Stream(context.Background(), "OMNIGRAPH_DEMO_EVENTS")
		if err == nil {
			n = s.CachedInfo().State.Msgs
		}
		if n == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the events stream holds %d events (%v), want 6", n, err)
		}
	}
	if dls := listDeadLetters(t, ns.url); len(dls) != 0 {
		t.Fatalf("dead letters %+v", dls)
	}
	w2.terminate(t)
	checkBatches(t, root, []int{0, 1, 2, 10, 11})
}
