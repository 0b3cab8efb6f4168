package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/omnigraph/omnigraph-worker/internal/graphtest"
)

// waitEvent is what the publish --wait tests read of an outcome event.
type waitEvent struct {
	Kind           string `json:"kind"`
	Outcome        string `json:"outcome"`
	Request        string `json:"request"`
	GraphCommitID  string `json:"graph_commit_id"`
	SourceStream   string `json:"source_stream"`
	SourceSequence uint64 `json:"source_sequence"`
	SourceMsgID    string `json:"source_msg_id"`
	ReceiptKey     string `json:"receipt_key"`
	Reason         string `json:"reason"`
	ErrorKind      string `json:"error_kind"`
	Error          string `json:"error"`
	DLQStream      string `json:"dlq_stream"`
	DLQSequence    uint64 `json:"dlq_sequence"`
}

// bodyFile writes body to a file of the test and returns its path.
func bodyFile(t *testing.T, body string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "batch.ndjson")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// publishWait runs `worker publish --wait` of body with args and returns stdout, stderr and
// the exit status.
func publishWait(t *testing.T, url, body string, args ...string) (string, string, int) {
	t.Helper()
	return runWorker(t, append(append([]string{"publish", "--graph", "demo", "--nats-url", url, "--wait"}, args...), bodyFile(t, body))...)
}

// decodeEvent reads the JSON event publish --wait --json printed.
func decodeEvent(t *testing.T, out string) waitEvent {
	t.Helper()
	var ev waitEvent
	if err := json.Unmarshal([]byte(out), &ev); err != nil {
		t.Fatalf("not an event: %v\n%s", err, out)
	}
	return ev
}

// commitCount is the number of main's graph commits.
func commitCount(t *testing.T, root string) int {
	t.Helper()
	var cs []json.RawMessage
	if err := json.Unmarshal([]byte(workerCmd(t, "commits", "--root", root, "--json")), &cs); err != nil {
		t.Fatal(err)
	}
	return len(cs)
}

// `worker publish --wait` waits for its own batch's outcome event and exits by it: 0 for a
// commit (the line or, with --json, the event on standard output), the kind's code for a dead
// letter (4 key conflict, 3 invalid) with the dead letter's sequence, 0 for an empty batch
// that made no commit, and wait_timeout's 13 when no worker answers; dlq replay --wait too.
func TestPublishWaitOutcomes(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	w := startWorker(t, root, ns.url, "")
	waitStream(t, ns.url)
	wait := []string{"--wait-timeout", "60s"}

	out, errOut, code := publishWait(t, ns.url, graphtest.BatchBody(0), append(wait, "--mode", "append", "--msg-id", "w-1")...)
	if code != 0 || !strings.Contains(out, "published to omnigraph.demo.ingest: stream OMNIGRAPH_DEMO sequence 1") ||
		!strings.Contains(out, "stream OMNIGRAPH_DEMO sequence 1 (msg id w-1): committed: load on main (append), 3 entities") ||
		!strings.Contains(out, ", commit ") {
		t.Fatalf("good batch: exit %d\n%s%s\n%s", code, out, errOut, w.out)
	}
	out, errOut, code = publishWait(t, ns.url, graphtest.BatchBody(1), append(wait, "--mode", "append", "--msg-id", "w-2", "--json")...)
	ev := decodeEvent(t, out)
	if code != 0 || ev.Kind != "load" || ev.Outcome != "committed" || ev.GraphCommitID == "" || ev.SourceSequence != 2 || ev.SourceMsgID != "w-2" ||
		ev.ReceiptKey != "w-2" || !strings.Contains(errOut, "sequence 2") {
		t.Fatalf("good batch --json: exit %d %+v\n%s%s", code, ev, out, errOut)
	}

	// A key conflict: exit 4, the dead-letter event with the dead letter's sequence.
	out, errOut, code = publishWait(t, ns.url, graphtest.BatchBody(0), append(wait, "--mode", "append", "--msg-id", "w-3")...)
	dls := listDeadLetters(t, ns.url)
	if code != 4 || len(dls) != 1 || !strings.Contains(out, "sequence 3 (msg id w-3): dead_lettered as key_conflict (key_conflict): ") ||
		!strings.Contains(out, fmt.Sprintf("dead letter %d on OMNIGRAPH_DEMO_DLQ", dls[0].Seq)) || !strings.Contains(errOut, "dead-lettered the request as key_conflict") {
		t.Fatalf("key conflict: exit %d\n%s%s\n%+v", code, out, errOut, dls)
	}
	out, _, code = publishWait(t, ns.url, graphtest.BatchBody(1), append(wait, "--mode", "append", "--msg-id", "w-4", "--json")...)
	dls = listDeadLetters(t, ns.url)
	if ev := decodeEvent(t, out); code != 4 || ev.Kind != "dead_lettered" || ev.Outcome != "dead_lettered" || ev.Reason != "key_conflict" || ev.ErrorKind != "key_conflict" ||
		ev.Error == "" || ev.DLQStream != "OMNIGRAPH_DEMO_DLQ" || len(dls) != 2 || ev.DLQSequence != dls[1].Seq || dls[1].OrigSeq != 4 || ev.SourceSequence != 4 {
		t.Fatalf("key conflict --json: exit %d %+v\n%s\n%+v", code, ev, out, dls)
	}

	// An invalid body (a type the schema does not declare): exit 3.
	out, errOut, code = publishWait(t, ns.url, `{"type":"Nope","data":{}}`, append(wait, "--json")...)
	if ev := decodeEvent(t, out); code != 3 || ev.Reason != "invalid" || ev.ErrorKind != "invalid" || !strings.Contains(ev.Error, "Nope") || ev.SourceSequence != 5 ||
		!strings.Contains(errOut, "dead-lettered the request as invalid") {
		t.Fatalf("invalid body: exit %d %+v\n%s%s", code, ev, out, errOut)
	}

	// An empty batch: acknowledged, no commit made.
	before := commitCount(t, root)
	for i, body := range []string{"", "\n\n"} {
		out, errOut, code = publishWait(t, ns.url, body, wait...)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("sequence %d: empty: no records, acknowledged without a commit", 6+i)) {
			t.Fatalf("empty batch %d: exit %d\n%s%s", i, code, out, errOut)
		}
	}
	waitAcked(t, ns.url, 7, w)
	if after := commitCount(t, root); after != before {
		t.Fatalf("the empty batches made commits: %d before, %d after", before, after)
	}

	// The same message id again: JetStream's duplicate, whose outcome was already reported.
	out, errOut, code = publishWait(t, ns.url, graphtest.BatchBody(0), append(wait, "--mode", "append", "--msg-id", "w-1")...)
	if code != 0 || !strings.Contains(out, "sequence 1 duplicate true") || !strings.Contains(out, "sequence 1 (msg id w-1): committed") {
		t.Fatalf("duplicate publish: exit %d\n%s%s", code, out, errOut)
	}

	// dlq replay --wait waits for each replayed message the same way: the key conflicts
	// replayed as merges commit (exit 0), the invalid body is dead-lettered again (exit 3).
	dlq := []string{"dlq", "replay", "--graph", "demo", "--nats-url", ns.url, "--wait", "--wait-timeout", "60s"}
	out, errOut, code = runWorker(t, append(dlq, "--reason", "key_conflict", "--mode", "merge")...)
	if code != 0 || !strings.Contains(out, "dlq seq 1: stream OMNIGRAPH_DEMO sequence 8 (msg id replay:OMNIGRAPH_DEMO_DLQ:1:1:0): committed: load on main (merge), 3 entities") ||
		!strings.Contains(out, "dlq seq 2: stream OMNIGRAPH_DEMO sequence 9 (msg id replay:OMNIGRAPH_DEMO_DLQ:2:1:0): committed: load on main (merge)") {
		t.Fatalf("dlq replay --wait: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runWorker(t, append(dlq, "--reason", "invalid")...)
	if code != 3 || !strings.Contains(out, "dlq seq 3: stream OMNIGRAPH_DEMO sequence 10 (msg id replay:OMNIGRAPH_DEMO_DLQ:3:1:0): dead_lettered as invalid (invalid)") || !strings.Contains(errOut, "dead-lettered the request as invalid") {
		t.Fatalf("dlq replay --wait of an invalid body: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runWorker(t, append(dlq, "--dry-run")...); code != 2 || !strings.Contains(errOut, "nothing to wait for") {
		t.Fatalf("dlq replay --wait --dry-run: exit %d %s", code, errOut)
	}

	// No worker: no outcome within --wait-timeout.
	w.terminate(t)
	start := time.Now()
	out, errOut, code = publishWait(t, ns.url, graphtest.BatchBody(2), "--wait-timeout", "1s", "--mode", "append")
	if code != 13 || !strings.Contains(errOut, "no outcome of request 11 on stream OMNIGRAPH_DEMO within 1s (--wait-timeout)") || time.Since(start) > 30*time.Second {
		t.Fatalf("no worker: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = runWorker(t, "dlq", "replay", "--graph", "demo", "--nats-url", ns.url, "--wait", "--wait-timeout", "1s", "--reason", "invalid")
	if code != 13 || !strings.Contains(errOut, "no outcome of request 12 on stream OMNIGRAPH_DEMO within 1s (--wait-timeout)") {
		t.Fatalf("dlq replay --wait with no worker: exit %d\n%s%s", code, out, errOut)
	}
	// --wait-timeout without --wait, and one not positive, are usage errors.
	if _, errOut, code := runWorker(t, "publish", "--graph", "demo", "--nats-url", ns.url, "--wait-timeout", "1s", bodyFile(t, "")); code != 2 || !strings.Contains(errOut, "needs --wait") {
		t.Fatalf("--wait-timeout without --wait: exit %d %s", code, errOut)
	}
	if _, errOut, code := publishWait(t, ns.url, "", "--wait-timeout", "0s"); code != 2 || !strings.Contains(errOut, "must be positive") {
		t.Fatalf("--wait-timeout 0s: exit %d %s", code, errOut)
	}
	// The requests the worker got: 1-10 each acknowledged once; 11 and 12 wait for the next
	// worker.
	checkExactlyOnce(t, root, 2)
}

// A batch held for an operator (the published version of the table it writes deleted: the
// graph is corrupt, which the worker meets when it applies the batch): publish
// --wait prints the held event and exits with the operators' code, 10. Once the graph is
// mended the batch commits and its commit event follows in the events stream; the same
// publish again (a duplicate) reports the commit.
func TestPublishWaitHeldForAnOperator(t *testing.T) {
	ns := startNATS(t)
	root := initGraph(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	w := startWorker(t, root, ns.url, "", "--http", addr)
	waitStream(t, ns.url)
	publishBody(t, ns.url, graphtest.BatchBody(0), nil)
	waitAcked(t, ns.url, 1, w)
	w.terminate(t)
	file := newestManifest(t, personTable(t, root))
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	w = startWorker(t, root, ns.url, "", "--http", addr, "--retry-max", "300ms")
	body := graphtest.BatchBody(1)
	out, errOut, code := publishWait(t, ns.url, body, "--wait-timeout", "60s", "--msg-id", "held-1")
	if code != 10 || !strings.Contains(out, "sequence 2 (msg id held-1): held for an operator (corrupt): ") ||
		!strings.Contains(errOut, "holds request 2 for an operator (corrupt)") {
		t.Fatalf("held: exit %d\n%s%s\n%s", code, out, errOut, w.out)
	}
	waitReady(t, addr, http.StatusServiceUnavailable, "operator required: corrupt")
	// Tried again every 300 ms: one held event for the hold, however many tries.
	time.Sleep(1500 * time.Millisecond)
	if n := countEvents(t, ns.url, 2, "held"); n != 1 {
		t.Fatalf("%d held events for one hold", n)
	}
	if err := os.WriteFile(file, good, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); countEvents(t, ns.url, 2, "committed") != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no commit event after the graph was mended\n%s", w.out)
		}
	}
	out, errOut, code = publishWait(t, ns.url, body, "--wait-timeout", "60s", "--msg-id", "held-1", "--json")
	if ev := decodeEvent(t, out); code != 0 || ev.Outcome != "committed" || ev.SourceSequence != 2 || ev.GraphCommitID == "" {
		t.Fatalf("after the fix: exit %d %+v\n%s%s", code, ev, out, errOut)
	}
	w.terminate(t)
	checkExactlyOnce(t, root, 2)
}

// countEvents is the number of events of outcome for source sequence seq in the events stream.
func countEvents(t *testing.T, url string, seq uint64, outcome string) int {
	t.Helper()
	ctx := context.Background()
	s, err := connectJS(t, url).Stream(ctx, "OMNIGRAPH_DEMO_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := info.State.FirstSeq; i <= info.State.LastSeq && info.State.Msgs > 0; i++ {
		m, err := s.GetMsg(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		var ev waitEvent
		if json.Unmarshal(m.Data, &ev) == nil && ev.SourceSequence == seq && ev.Outcome == outcome {
			n++
		}
	}
	return n
}
